//! Cache-line flush and fence instructions (implementation pending).
