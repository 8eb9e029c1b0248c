//! An immutable, shared string for labels and thread names in results: a
//! scope's result holds a copy of a reference to a string the profiler
//! keeps once, so collecting a frame allocates no string per scope.
//!
//! The profiler keeps the first labels and thread names it sees for the
//! life of the process (up to [`KEPT_BYTES`] in all): a result's reference
//! to one of those is a plain pointer, so cloning and dropping it touch no
//! reference count (an atomic operation, the biggest part of a scope's
//! collect cost on the H200's host). Past that budget, strings are
//! reference counted. Either way the reference is one pointer
//! ([`arcstr::ArcStr`], whose leaked strings count no references), so that
//! a result is small: collecting a frame writes every result, and dropping
//! it reads every one.

use arcstr::ArcStr;
#[cfg(feature = "serde")]
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes of labels and thread names kept for the life of the process.
pub const KEPT_BYTES: usize = 1 << 20;

/// A shared, immutable string (a label or a thread name of a
/// [`ScopeResult`](crate::ScopeResult)). Cloning it copies a pointer, or
/// increments a reference count for strings past the profiler's budget of
/// kept strings (1 MiB). It reads as a `&str` (`Deref`,
/// [`SharedStr::as_str`]), compares with `str`, `&str` and `String`, prints
/// and serializes as its text.
#[derive(Clone, Default)]
pub struct SharedStr(ArcStr);

impl SharedStr {
    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether `self` and `other` are the one shared copy (not only equal
    /// text): a pointer comparison.
    #[inline]
    pub(crate) fn is_same(&self, other: &Self) -> bool {
        ArcStr::ptr_eq(&self.0, &other.0)
    }

    /// Whether the string is kept for the life of the process (its copies
    /// count no references).
    #[cfg(test)]
    fn is_kept(&self) -> bool {
        ArcStr::is_static(&self.0)
    }

    /// `s`, kept for the life of the process while the budget lasts
    /// ([`KEPT_BYTES`]; each text once), reference counted past it.
    pub(crate) fn kept(s: &str) -> Self {
        static KEPT: Mutex<(Option<HashSet<ArcStr>>, usize)> = Mutex::new((None, 0));
        let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        let (set, bytes) = &mut *kept;
        let set = set.get_or_insert_with(HashSet::new);
        if let Some(k) = set.get(s) {
            return Self(k.clone());
        }
        if *bytes + s.len() > KEPT_BYTES {
            return Self(ArcStr::from(s));
        }
        let k = ArcStr::from(s);
        // Never freed from now on, and its copies count no references:
        // bounded by KEPT_BYTES for the whole process, a leak by design.
        k.leak();
        set.insert(k.clone());
        *bytes += s.len();
        Self(k)
    }
}

impl PartialEq for SharedStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedStr {}

impl Hash for SharedStr {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl PartialOrd for SharedStr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedStr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        Self(ArcStr::from(s))
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        Self(ArcStr::from(s))
    }
}

impl From<Arc<str>> for SharedStr {
    fn from(s: Arc<str>) -> Self {
        Self(ArcStr::from(&*s))
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.as_str().to_string()
    }
}

impl From<&SharedStr> for String {
    fn from(s: &SharedStr) -> Self {
        s.as_str().to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        self.as_str() == other.as_str()
    }
}

#[cfg(feature = "serde")]
impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl<'de> Deserialize<'de> for SharedStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(String::deserialize(d)?.into())
    }
}

/// Labels seen at collection, kept once each. Bounded: past
/// [`Interner::MAX`] different labels it starts afresh (results keep their
/// own references), so labels made anew every frame cannot grow it forever.
#[derive(Default)]
pub(crate) struct Interner {
    set: HashSet<SharedStr>,
}

impl Interner {
    const MAX: usize = 4096;

    /// The shared copy of `s`.
    pub(crate) fn get(&mut self, s: &str) -> SharedStr {
        if let Some(v) = self.set.get(s) {
            return v.clone();
        }
        if self.set.len() >= Self::MAX {
            self.set.clear();
        }
        let v = SharedStr::kept(s);
        self.set.insert(v.clone());
        v
    }
}

#[cfg(test)]
mod kept_tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash(s: &SharedStr) -> u64 {
        let mut h = DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    }

    /// A kept string is stored once, and compares, hashes and orders by its
    /// text whichever way it is held.
    #[test]
    fn kept_strings_are_one_copy_and_compare_by_text() {
        let a = SharedStr::kept("kept label");
        let b = SharedStr::kept(&String::from("kept label"));
        assert!(a.is_kept());
        assert_eq!(a.as_str().as_ptr(), b.as_str().as_ptr());
        let counted = SharedStr::from("kept label");
        assert!(!counted.is_kept());
        assert_eq!(a, counted);
        assert_eq!(hash(&a), hash(&counted));
        assert_eq!(a.cmp(&counted), std::cmp::Ordering::Equal);
        assert!(SharedStr::kept("a") < SharedStr::kept("b"));
        assert_eq!(SharedStr::default(), "");
    }

    /// Past the budget, strings are counted, never lost or truncated.
    #[test]
    fn past_the_budget_strings_are_counted() {
        let big = "x".repeat(KEPT_BYTES + 1);
        let s = SharedStr::kept(&big);
        assert!(!s.is_kept());
        assert_eq!(s.len(), KEPT_BYTES + 1);
    }
}
