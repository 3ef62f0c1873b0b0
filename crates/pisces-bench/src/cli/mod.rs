//! A whole `pisces-bench` run: the options, the plan of measurements, the report
//! directory, and the run itself.

pub mod args;
pub mod facts;
pub mod out_dir;
pub mod plan;
pub mod run;
