//! A pool file whose advisory lock ends with the value that holds it.

use std::fs::File;
use std::os::fd::AsRawFd;

/// A pool file whose advisory lock ends with this value: the drop unlocks
/// (`flock(LOCK_UN)`) before the descriptor closes.
///
/// Closing alone is not enough. The lock belongs to the open file description, and a
/// child process that any thread of this process forks holds a duplicate of every
/// descriptor until its `exec` (close-on-exec closes them only then). A pool closed
/// while such a child has not reached its `exec` would stay locked until it does, and
/// an open right after the close (by this process, or by the program the child runs)
/// would be refused as open elsewhere. An unlock acts on the description itself, so it
/// ends the lock whatever duplicates exist.
#[derive(Debug)]
pub(crate) struct LockedFile(File);

impl LockedFile {
    /// `file`, whose lock (if it holds one) now ends with the returned value.
    pub(crate) fn new(file: File) -> LockedFile {
        LockedFile(file)
    }
}

impl std::ops::Deref for LockedFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.0
    }
}

impl Drop for LockedFile {
    fn drop(&mut self) {
        // SAFETY: the descriptor is valid until `self.0` drops, after this call; flock
        // touches no memory. Unlocking a description that holds no lock is a no-op.
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
    }
}
