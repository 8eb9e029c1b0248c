use crate::CommonCounterSet;
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// Who may read a counter sample buffer (Metal's `MTLStorageMode`, the two
/// modes that apply to counter sample buffers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum StorageMode {
    /// The CPU may resolve the buffer (`resolve_counter_range`) as well as the GPU.
    #[default]
    Shared,
    /// Only a GPU-side resolve into a buffer may read the samples.
    Private,
}

/// Describes a counter sample buffer (Metal's `MTLCounterSampleBufferDescriptor`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CounterHeapType {
    /// GPU timestamps, written with `write_timestamp`.
    Timestamp,
}

/// Describes a counter heap (`MTL4CounterHeapDescriptor`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct CounterHeapDescriptor {
    /// What the heap's entries hold.
    pub heap_type: CounterHeapType,
    /// The number of entries; at least 1.
    pub count: u32,
    /// A name for debugging tools and error messages (`MTL4CounterHeap.label`).
    pub label: String,
}

impl CounterHeapDescriptor {
    /// A timestamp heap of `count` entries, labelled `timestamp heap of {count}`.
    pub fn timestamp(count: u32) -> Self {
        Self {
            heap_type: CounterHeapType::Timestamp,
            count,
            label: format!("timestamp heap of {count}"),
        }
    }

    /// The same descriptor with `label`.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }
}

/// How precisely `write_timestamp` must place its timestamp
/// (`MTL4TimestampGranularity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum TimestampGranularity {
    /// The cheapest placement that still follows all prior work; writes inside
    /// a pass may be coalesced into one timestamp at the pass's end.
    Relaxed,
    /// A timestamp taken exactly after all prior work has finished.
    Precise,
}

/// The render stage that must complete before a render encoder writes a
/// timestamp (Metal's `MTLRenderStages`, as passed to
/// `MTL4RenderCommandEncoder.writeTimestamp(granularity:after:counterHeap:index:)`).
///
/// Each backend maps a stage onto its own pipeline stages; a stage it lacks
/// is [`InvalidInput::UnsupportedRenderStage`](crate::InvalidInput::UnsupportedRenderStage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum RenderStage {
    /// Vertex shading (`MTLRenderStages.vertex`).
    Vertex,
    /// Fragment shading (`MTLRenderStages.fragment`).
    Fragment,
    /// Tile shading (`MTLRenderStages.tile`), of Apple GPUs.
    Tile,
    /// Object shading (`MTLRenderStages.object`), before mesh shading.
    Object,
    /// Mesh shading (`MTLRenderStages.mesh`).
    Mesh,
}

impl RenderStage {
    /// Every stage, in the order of Metal's `MTLRenderStages` bits.
    pub const ALL: [RenderStage; 5] = [
        RenderStage::Vertex,
        RenderStage::Fragment,
        RenderStage::Tile,
        RenderStage::Object,
        RenderStage::Mesh,
    ];

    /// Metal's name of the stage: `vertex`, `fragment`, `tile`, `object`, `mesh`.
    pub fn name(self) -> &'static str {
        match self {
            RenderStage::Vertex => "vertex",
            RenderStage::Fragment => "fragment",
            RenderStage::Tile => "tile",
            RenderStage::Object => "object",
            RenderStage::Mesh => "mesh",
        }
    }
}

impl std::fmt::Display for RenderStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_descriptors_carry_a_label() {
        let d = CounterHeapDescriptor::timestamp(4);
        assert_eq!(d.label, "timestamp heap of 4");
        let d = d.with_label("frame times");
        assert_eq!(
            (d.heap_type, d.count, d.label.as_str()),
            (CounterHeapType::Timestamp, 4, "frame times")
        );
    }

    #[test]
    fn render_stages_have_metal_names() {
        let names: Vec<String> = RenderStage::ALL.iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["vertex", "fragment", "tile", "object", "mesh"]);
        for s in RenderStage::ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(serde_json::from_str::<RenderStage>(&json).unwrap(), s);
        }
    }
}
