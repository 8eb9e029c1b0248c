//! A completion marker written once for every backend: a state (idle,
//! submitted, signaled) over the backend's way of learning that the work
//! before it finished ([`MarkerSignal`]: an event it polls, or a callback
//! that sets the marker's [`MarkerFlag`]).

use crate::backend::BackendMarker;
use crate::{Error, Result};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

const IDLE: u8 = 0;
const SUBMITTED: u8 = 1;
const SIGNALED: u8 = 2;

/// How a backend learns that the work queued before a marker finished.
pub trait MarkerSignal: Send + Sync + 'static {
    /// Whether the work finished, asked while the marker is submitted and
    /// not seen signaled: `true` from a backend that knows (an event's
    /// query); or `false` after letting its callbacks run (a device poll),
    /// where a callback sets the marker's [`MarkerFlag`].
    ///
    /// # Errors
    /// The backend's, where it could not ask the device.
    fn poll(&self) -> Result<bool>;
}

/// The state of a [`Marker`], shared with what signals it: a backend's
/// completion callback calls [`MarkerFlag::signal`].
#[derive(Clone, Debug)]
pub struct MarkerFlag(Arc<AtomicU8>);

impl MarkerFlag {
    /// Marks the marker signaled, if it is submitted.
    pub fn signal(&self) {
        let _ = self
            .0
            .compare_exchange(SUBMITTED, SIGNALED, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A completion marker: submitted behind the work on a device's queue
/// ([`BackendDevice::submit_marker`](crate::BackendDevice::submit_marker)),
/// it signals once that work finished; reset, it can be submitted again.
pub struct Marker<S> {
    flag: MarkerFlag,
    signal: S,
}

impl<S: MarkerSignal> Marker<S> {
    /// An idle marker over the backend's `signal`.
    pub fn new(signal: S) -> Self {
        Self {
            flag: MarkerFlag(Arc::new(AtomicU8::new(IDLE))),
            signal,
        }
    }

    /// The backend's part.
    pub fn signal_source(&self) -> &S {
        &self.signal
    }

    /// The backend's submission of the marker: marks it submitted, then
    /// `queue` queues it behind the device's work, given the flag its
    /// callback sets (if it has one).
    ///
    /// # Errors
    /// A marker already in flight (submitted, and not seen signaled and
    /// reset since); `queue`'s error (the marker is idle again then).
    pub fn submit(&self, queue: impl FnOnce(&S, &MarkerFlag) -> Result<()>) -> Result<()> {
        self.flag
            .0
            .compare_exchange(IDLE, SUBMITTED, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| Error::Internal("marker submitted while in flight".into()))?;
        let queued = queue(&self.signal, &self.flag);
        if queued.is_err() {
            self.flag.0.store(IDLE, Ordering::Release);
        }
        queued
    }

    /// Whether it signaled: the work queued before it finished.
    ///
    /// # Errors
    /// The backend's, where it could not ask the device.
    pub fn is_signaled(&self) -> Result<bool> {
        let state = &self.flag.0;
        if state.load(Ordering::Acquire) == SUBMITTED && self.signal.poll()? {
            self.flag.signal();
        }
        Ok(state.load(Ordering::Acquire) == SIGNALED)
    }

    /// Makes a signaled marker ready to be submitted again.
    ///
    /// # Errors
    /// A marker that has not signaled; the backend's, where it could not
    /// ask the device.
    pub fn reset(&self) -> Result<()> {
        if !self.is_signaled()? {
            return Err(Error::Internal("marker reset before it signaled".into()));
        }
        self.flag.0.store(IDLE, Ordering::Release);
        Ok(())
    }
}

impl<S: MarkerSignal> BackendMarker for Marker<S> {
    fn is_signaled(&self) -> Result<bool> {
        Marker::is_signaled(self)
    }

    fn reset(&self) -> Result<()> {
        Marker::reset(self)
    }
}

#[cfg(test)]
mod tests {
    use super::{Marker, MarkerSignal};
    use crate::Result;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Signals when `done` is set, as an event's query does.
    struct Event {
        done: AtomicBool,
    }

    impl MarkerSignal for Event {
        fn poll(&self) -> Result<bool> {
            Ok(self.done.load(Ordering::Acquire))
        }
    }

    /// Only a callback signals.
    struct Callback;

    impl MarkerSignal for Callback {
        fn poll(&self) -> Result<bool> {
            Ok(false)
        }
    }

    /// Idle, submitted, signaled, reset and submitted again; refused while in
    /// flight or before it signaled; a failed queueing leaves it idle.
    #[test]
    fn a_marker_goes_round_its_states() {
        let m = Marker::new(Event {
            done: AtomicBool::new(true),
        });
        assert!(!m.is_signaled().unwrap(), "idle, not signaled");
        assert!(m.reset().is_err(), "reset before it signaled");
        m.signal_source().done.store(false, Ordering::Release);
        m.submit(|_, _| Ok(())).unwrap();
        assert!(m.submit(|_, _| Ok(())).is_err(), "in flight");
        assert!(!m.is_signaled().unwrap());
        m.signal_source().done.store(true, Ordering::Release);
        assert!(m.is_signaled().unwrap());
        m.reset().unwrap();
        assert!(!m.is_signaled().unwrap(), "idle again");
        assert!(m
            .submit(|_, _| Err(crate::Error::Internal("queue full".into())))
            .is_err());
        m.submit(|_, _| Ok(())).unwrap();

        let m = Marker::new(Callback);
        let mut flag = None;
        m.submit(|_, f| {
            flag = Some(f.clone());
            Ok(())
        })
        .unwrap();
        assert!(!m.is_signaled().unwrap());
        flag.unwrap().signal();
        assert!(m.is_signaled().unwrap());
        m.reset().unwrap();
    }
}
