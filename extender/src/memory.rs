//! Giving memory back to the system after a large request.
//!
//! The C allocator keeps what a request freed in its per-thread arenas, so one large body
//! would otherwise leave the process at its peak size until the next one reuses it.

/// Bodies at least this large are followed by [`release_free_memory`].
pub const RELEASE_AFTER_BYTES: usize = 1024 * 1024;

/// Returns the allocator's free pages to the system (glibc on Linux; elsewhere nothing).
#[allow(unsafe_code)]
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks; it
    // has no preconditions and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
