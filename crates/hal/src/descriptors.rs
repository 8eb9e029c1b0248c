use crate::CommonCounterSet;
use serde::{Deserialize, Serialize};

/// Who may read a counter sample buffer (Metal's `MTLStorageMode`, the two
/// modes that apply to counter sample buffers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageMode {
    /// The CPU may resolve the buffer (`resolve_counter_range`) as well as the GPU.
    #[default]
    Shared,
    /// Only a GPU-side resolve into a buffer may read the samples.
    Private,
}

/// Describes a counter sample buffer (Metal's `MTLCounterSampleBufferDescriptor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterSampleBufferDescriptor {
    /// The counter set every sample of the buffer holds.
    pub counter_set: CommonCounterSet,
    /// A name for debugging tools and error messages.
    pub label: String,
    /// Whether the CPU may resolve the buffer.
    pub storage_mode: StorageMode,
    /// The number of samples the buffer holds; at least 1.
    pub sample_count: u32,
}

impl CounterSampleBufferDescriptor {
    /// A descriptor for `sample_count` samples of `counter_set`, shared storage.
    pub fn new(counter_set: CommonCounterSet, label: impl Into<String>, sample_count: u32) -> Self {
        Self {
            counter_set,
            label: label.into(),
            storage_mode: StorageMode::Shared,
            sample_count,
        }
    }

    /// The same descriptor with `storage_mode`.
    pub fn with_storage_mode(mut self, storage_mode: StorageMode) -> Self {
        self.storage_mode = storage_mode;
        self
    }

    /// The sample count, checked against 0 and a device's `limit`: the
    /// typed error every backend gives for either.
    pub fn checked_sample_count(&self, limit: u32) -> crate::Result<u32> {
        let n = self.sample_count;
        if n == 0 {
            return Err(crate::InvalidInput::SampleCountZero {
                label: self.label.clone(),
            }
            .into());
        }
        if n > limit {
            return Err(crate::InvalidInput::SampleCountTooLarge {
                label: self.label.clone(),
                requested: n,
                limit,
            }
            .into());
        }
        Ok(n)
    }
}

/// The kind of data a Metal 4 counter heap holds (`MTL4CounterHeapType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterHeapType {
    /// GPU timestamps, written with `write_timestamp`.
    Timestamp,
}

/// Describes a counter heap (`MTL4CounterHeapDescriptor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterHeapDescriptor {
    /// What the heap's entries hold.
    pub heap_type: CounterHeapType,
    /// The number of entries; at least 1.
    pub count: u32,
}

impl CounterHeapDescriptor {
    /// A timestamp heap of `count` entries.
    pub fn timestamp(count: u32) -> Self {
        Self {
            heap_type: CounterHeapType::Timestamp,
            count,
        }
    }
}

/// How precisely `write_timestamp` must place its timestamp
/// (`MTL4TimestampGranularity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimestampGranularity {
    /// The cheapest placement that still follows all prior work; writes inside
    /// a pass may be coalesced into one timestamp at the pass's end.
    Relaxed,
    /// A timestamp taken exactly after all prior work has finished.
    Precise,
}
