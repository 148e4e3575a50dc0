//! The recorder's one way to take its mutexes.

use std::sync::{Mutex, MutexGuard};

/// Takes `m`, poisoned or not: a panic while one of the recorder's locks was held cannot
/// leave the state half-updated in a way that matters more than refusing to go on would,
/// so the recorder keeps going with the data.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
