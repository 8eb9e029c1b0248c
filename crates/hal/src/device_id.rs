//! Which device an object belongs to: the one foreign-object check every
//! backend uses.

use crate::{Error, InvalidInput, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// Tells devices apart. A backend gives each device it opens or wraps a new
/// id, and every object made from the device (sample buffer, heap, recorder,
/// resolve destination) keeps a copy of it. A call that takes two objects
/// compares their ids with [`DeviceId::check`] before anything reaches the
/// driver, so another device's object is a typed
/// [`InvalidInput::ForeignObject`] error, never a driver's validation error.
///
/// Ids are unique in the process and never reused: two wrappers of one
/// driver device (wrapped twice) are two devices here, as their
/// bookkeeping is separate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceId(u64);

impl DeviceId {
    /// A new id, different from every id handed out before in the process.
    pub fn allocate() -> Self {
        // 2^64 allocations would take centuries at any rate a process can
        // open devices: the counter does not wrap in practice.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The id as a number, for messages and logs.
    pub fn get(self) -> u64 {
        self.0
    }

    /// `Ok` where `object` (the id an object keeps) is this device's; else
    /// [`InvalidInput::ForeignObject`] naming the object as `what`.
    #[inline]
    pub fn check(self, object: DeviceId, what: &'static str) -> Result<()> {
        if self == object {
            Ok(())
        } else {
            Err(foreign(what))
        }
    }
}

#[cold]
#[inline(never)]
fn foreign(what: &'static str) -> Error {
    InvalidInput::ForeignObject { what }.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_device_passes_and_another_is_a_foreign_object_naming_it() {
        let (a, b) = (DeviceId::allocate(), DeviceId::allocate());
        assert_ne!(a, b);
        assert_eq!(a.check(a, "recorder"), Ok(()));
        let copy = a;
        assert_eq!(copy.check(a, "recorder"), Ok(()));
        let e = a.check(b, "counter heap").unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&InvalidInput::ForeignObject {
                what: "counter heap"
            })
        );
        assert_eq!(
            e.to_string(),
            "invalid: counter heap belongs to another device"
        );
        assert_eq!(
            b.check(a, "recorder").unwrap_err().invalid(),
            Some(&InvalidInput::ForeignObject { what: "recorder" })
        );
    }

    /// Ids taken on several threads at once are all different.
    #[test]
    fn ids_from_threads_are_unique() {
        let ids: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..1000)
                            .map(|_| DeviceId::allocate().get())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
        assert!(!ids.contains(&0));
    }
}
