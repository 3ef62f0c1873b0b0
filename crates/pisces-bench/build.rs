//! Compiles `c/capi_hash.c`, the C side of the `capi` workload, against the C
//! interface's header (`crates/pisces-capi/include/pisces.h`). Needs only a C compiler
//! (the one rustc links with); the functions it calls come from the `pisces-capi`
//! crate, linked into the harness.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=c/capi_hash.c");
    println!("cargo::rerun-if-changed=../pisces-capi/include/pisces.h");
    cc::Build::new()
        .file("c/capi_hash.c")
        .include("../pisces-capi/include")
        .flag_if_supported("-std=c11")
        .flag_if_supported("-Wextra")
        // As a C program is built for production (the release profile's debug info
        // would otherwise keep a frame pointer in every C function).
        .force_frame_pointer(false)
        .warnings_into_errors(true)
        .compile("pisces_bench_capi");
}
