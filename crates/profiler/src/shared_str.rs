//! An immutable, shared string for labels and thread names in results: a
//! scope's result holds a reference-counted copy of a string the profiler
//! keeps once, so collecting a frame allocates no string per scope.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared, immutable string (a label or a thread name of a
/// [`ScopeResult`](crate::ScopeResult)). Cloning it is a reference-count
/// increment. It reads as a `&str` (`Deref`, [`SharedStr::as_str`]), compares
/// with `str`, `&str` and `String`, prints and serializes as its text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SharedStr(Arc<str>);

impl SharedStr {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        Self(s.into())
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        Self(s.into())
    }
}

impl From<Arc<str>> for SharedStr {
    fn from(s: Arc<str>) -> Self {
        Self(s)
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.0.to_string()
    }
}

impl From<&SharedStr> for String {
    fn from(s: &SharedStr) -> Self {
        s.0.to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        self == &*other.0
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

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
        let v = SharedStr::from(s);
        self.set.insert(v.clone());
        v
    }
}
