//! Frame sinks on the fake backend (CPU only): every collected frame goes to
//! the sink once, oldest first, with the calibration its times came from;
//! with the feature `tracy`, the Tracy sink takes a profiler's frames.

use gpu_counters_hal::fake::FakeDevice;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{Calibration, DeviceInfo};
use gpu_counters_profiler::{FrameResult, FrameSink, Profiler, ProfilerOptions};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Seen {
    frames: Vec<(String, u64, usize, u64)>,
}

struct Recording(Arc<Mutex<Seen>>);

impl FrameSink for Recording {
    fn frame(&mut self, device: &DeviceInfo, calibration: &Calibration, frame: &FrameResult) {
        self.0.lock().unwrap().frames.push((
            device.name.clone(),
            frame.index,
            frame.scopes.len(),
            calibration.latest().cpu_ns,
        ));
    }
}

/// Runs `frames` frames of two nested scopes each, collecting as it goes;
/// returns what `collect` returned.
fn run(device: &FakeDevice, profiler: &Profiler<FakeDevice>, frames: u64) -> Vec<FrameResult> {
    let mut out = Vec::new();
    for _ in 0..frames {
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = device.recorder();
        let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
        let inner = frame.scope(&mut cmd, "inner", PassKind::Compute).unwrap();
        cmd.dispatch(64);
        inner.end(&mut cmd).unwrap();
        outer.end(&mut cmd).unwrap();
        let submission = device.submit(cmd).unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        submission.wait();
        out.extend(profiler.collect().unwrap());
    }
    out.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
    out
}

#[test]
fn a_sink_gets_every_collected_frame_once_in_order() {
    let device = FakeDevice::new("fake GPU", 64).unwrap();
    let profiler = Profiler::new(&device, ProfilerOptions::default()).unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    profiler.set_frame_sink(Some(Box::new(Recording(seen.clone()))));
    let results = run(&device, &profiler, 5);
    let seen = seen.lock().unwrap();
    let got: Vec<(u64, usize)> = seen.frames.iter().map(|f| (f.1, f.2)).collect();
    let want: Vec<(u64, usize)> = results.iter().map(|r| (r.index, r.scopes.len())).collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 5);
    assert!(seen.frames.iter().all(|f| f.0 == "fake GPU" && f.2 == 2));
    // Removing the sink stops the feed.
    drop(seen);
    profiler.set_frame_sink(None);
    assert_eq!(run(&device, &profiler, 1).len(), 1);
}

/// The Tracy sink on a profiler: frames go to a Tracy client started in this
/// process (no profiler connects; the client keeps the events), and the
/// profiler returns them as before.
#[cfg(feature = "tracy")]
#[test]
fn stream_to_tracy_takes_a_profilers_frames() {
    let device = FakeDevice::new("fake GPU", 64).unwrap();
    let profiler = Profiler::new(&device, ProfilerOptions::default()).unwrap();
    profiler.stream_to_tracy();
    let results = run(&device, &profiler, 3);
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r.scopes.len() == 2));
}
