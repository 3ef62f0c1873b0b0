//! Termination signals: the first SIGINT, SIGTERM or SIGHUP asks the run to stop
//! (the current measurement stops, its pool file is removed, and the report is written
//! with what was measured); a second one ends the process at once (exit status 130).

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by SIGINT, SIGTERM or SIGHUP: the current measurement stops, its pool file is
/// removed, and the report is written with what was measured. A second signal ends
/// the process at once (exit status 130).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once a termination signal arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Install the handlers (once per run; installing again is harmless).
pub fn catch_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::flag;
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // Order matters: the first signal only sets the flag (the shutdown action sees
        // it unset); a second one, with the flag set, exits. Errors leave the default
        // action, which is only less tidy.
        let _ = flag::register_conditional_shutdown(sig, 130, &INTERRUPTED);
        let _ = flag::register(sig, &INTERRUPTED);
    }
}
