//! Calibration of a device's timestamps onto the CPU clock (Metal's
//! `sampleTimestamps()`): calibrated reads of both clocks, or a
//! timestamp-only submission bracketed by two CPU clock reads.

use crate::clock::{CalibratedClock, CALIBRATION_BURST};
use crate::command::CommandBuffer;
use crate::device::{mask, Device};
use crate::query::QueryPool;
use ash::vk;
use gpu_counters_hal::bookkeeping::QueryRead;
use gpu_counters_hal::{cpu_monotonic_ns, Calibration, Error, Result, TimestampPair};

impl Device {
    /// A CPU `CLOCK_MONOTONIC` time and a GPU timestamp taken together, with
    /// the most they may be apart (Metal's `sampleTimestamps()`).
    ///
    /// With calibrated timestamps this reads both clocks a few times and keeps
    /// the read with the smallest max deviation; without them it brackets a
    /// timestamp-only submission between two CPU clock reads.
    pub fn sample_timestamps(&self) -> Result<TimestampPair> {
        match &self.shared.calibrated {
            Some(clock) => clock.read_best(CALIBRATION_BURST),
            None => self.bracketed_read(),
        }
    }

    /// One `vkGetCalibratedTimestamps` read (device and `CLOCK_MONOTONIC`).
    pub fn calibrated_timestamp_read(&self) -> Result<Option<TimestampPair>> {
        self.shared
            .calibrated
            .as_ref()
            .map(CalibratedClock::read)
            .transpose()
    }

    fn bracketed_read(&self) -> Result<TimestampPair> {
        let cmd = CommandBuffer::new(self)?;
        let pool = QueryPool::new(self, vk::QueryType::TIMESTAMP, 1, None)?;
        // SAFETY: the pool was just reset on the host and the command buffer
        // is recording; the pool outlives the wait below.
        unsafe {
            self.raw().cmd_write_timestamp2(
                cmd.raw(),
                vk::PipelineStageFlags2::ALL_COMMANDS,
                pool.raw,
                0,
            );
        }
        let before = cpu_monotonic_ns();
        let submission = cmd.commit()?;
        submission.wait()?;
        let after = cpu_monotonic_ns();
        let mut data = Vec::new();
        pool.read_into(0, 1, &mut data)?;
        if data[1] == 0 {
            return Err(Error::Internal(
                "bracketing timestamp not available after its submission completed".into(),
            ));
        }
        let half = (after - before) / 2;
        Ok(TimestampPair {
            cpu_ns: before + half,
            gpu_ticks: data[0] & mask(self.shared.caps.timestamp_valid_bits),
            max_deviation_ns: half + (after - before) % 2,
        })
    }

    /// A calibration of this device's timestamps onto the CPU clock, from a
    /// fresh [`Device::sample_timestamps`].
    pub fn calibration(&self) -> Result<Calibration> {
        self.shared.require_timestamps()?;
        let pair = self.sample_timestamps()?;
        Calibration::new(
            self.shared.caps.calibration,
            self.shared.caps.timestamp_period_ns,
            self.shared.caps.timestamp_valid_bits,
            pair,
        )
    }

    /// Adds a fresh anchor to `calibration` if it is due for a refit.
    pub fn refresh_calibration(&self, calibration: &mut Calibration) -> Result<()> {
        if calibration.needs_refit(cpu_monotonic_ns()) {
            calibration.add_anchor(self.sample_timestamps()?)?;
        }
        Ok(())
    }
}
