#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};
use std::fmt;

/// The common counter sets, Metal's `MTLCommonCounterSet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CommonCounterSet {
    /// GPU timestamps (`MTLCommonCounterSetTimestamp`); results are
    /// [`crate::CounterResultTimestamp`].
    Timestamp,
    /// Cycles spent in each pipeline stage (`MTLCommonCounterSetStageUtilization`);
    /// only offered where real hardware counters exist. Results are
    /// [`crate::CounterResultStageUtilization`].
    StageUtilization,
    /// Pipeline statistics (`MTLCommonCounterSetStatistic`); results are
    /// [`crate::CounterResultStatistic`].
    Statistic,
}

impl CommonCounterSet {
    /// Every set, in a stable order.
    pub const ALL: [CommonCounterSet; 3] = [
        CommonCounterSet::Timestamp,
        CommonCounterSet::StageUtilization,
        CommonCounterSet::Statistic,
    ];

    /// The set's name as used in JSON output: `timestamp`, `stage_utilization`
    /// or `statistic`.
    pub fn name(self) -> &'static str {
        match self {
            CommonCounterSet::Timestamp => "timestamp",
            CommonCounterSet::StageUtilization => "stage_utilization",
            CommonCounterSet::Statistic => "statistic",
        }
    }

    /// Size in bytes of one resolved sample of this set (Metal's result struct).
    pub fn result_size(self) -> usize {
        match self {
            CommonCounterSet::Timestamp => std::mem::size_of::<crate::CounterResultTimestamp>(),
            CommonCounterSet::StageUtilization => {
                std::mem::size_of::<crate::CounterResultStageUtilization>()
            }
            CommonCounterSet::Statistic => std::mem::size_of::<crate::CounterResultStatistic>(),
        }
    }
}

impl fmt::Display for CommonCounterSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The common counters, Metal's `MTLCommonCounter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum CommonCounter {
    /// A GPU timestamp.
    Timestamp,
    /// Patches read by the tessellator.
    TessellationInputPatches,
    /// Vertex shader invocations.
    VertexInvocations,
    /// Post-tessellation vertex (evaluation) shader invocations.
    PostTessellationVertexInvocations,
    /// Primitives that reached the clipper.
    ClipperInvocations,
    /// Primitives that left the clipper.
    ClipperPrimitivesOut,
    /// Fragment shader invocations.
    FragmentInvocations,
    /// Fragments (samples) that passed the depth and stencil tests.
    FragmentsPassed,
    /// Compute kernel invocations.
    ComputeKernelInvocations,
    /// Total GPU cycles.
    TotalCycles,
    /// Cycles spent on vertex work.
    VertexCycles,
    /// Cycles spent on tessellation.
    TessellationCycles,
    /// Cycles spent on post-tessellation vertex work.
    PostTessellationVertexCycles,
    /// Cycles spent on fragment work.
    FragmentCycles,
    /// Cycles spent writing render targets.
    RenderTargetWriteCycles,
}

impl CommonCounter {
    /// The counter's name in snake case, as used in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            CommonCounter::Timestamp => "timestamp",
            CommonCounter::TessellationInputPatches => "tessellation_input_patches",
            CommonCounter::VertexInvocations => "vertex_invocations",
            CommonCounter::PostTessellationVertexInvocations => {
                "post_tessellation_vertex_invocations"
            }
            CommonCounter::ClipperInvocations => "clipper_invocations",
            CommonCounter::ClipperPrimitivesOut => "clipper_primitives_out",
            CommonCounter::FragmentInvocations => "fragment_invocations",
            CommonCounter::FragmentsPassed => "fragments_passed",
            CommonCounter::ComputeKernelInvocations => "compute_kernel_invocations",
            CommonCounter::TotalCycles => "total_cycles",
            CommonCounter::VertexCycles => "vertex_cycles",
            CommonCounter::TessellationCycles => "tessellation_cycles",
            CommonCounter::PostTessellationVertexCycles => "post_tessellation_vertex_cycles",
            CommonCounter::FragmentCycles => "fragment_cycles",
            CommonCounter::RenderTargetWriteCycles => "render_target_write_cycles",
        }
    }

    /// The statistic counters in the field order of
    /// [`crate::CounterResultStatistic`].
    pub const STATISTICS: [CommonCounter; 8] = [
        CommonCounter::TessellationInputPatches,
        CommonCounter::VertexInvocations,
        CommonCounter::PostTessellationVertexInvocations,
        CommonCounter::ClipperInvocations,
        CommonCounter::ClipperPrimitivesOut,
        CommonCounter::FragmentInvocations,
        CommonCounter::FragmentsPassed,
        CommonCounter::ComputeKernelInvocations,
    ];

    /// The stage-utilization counters in the field order of
    /// [`crate::CounterResultStageUtilization`].
    pub const STAGE_UTILIZATION: [CommonCounter; 6] = [
        CommonCounter::TotalCycles,
        CommonCounter::VertexCycles,
        CommonCounter::TessellationCycles,
        CommonCounter::PostTessellationVertexCycles,
        CommonCounter::FragmentCycles,
        CommonCounter::RenderTargetWriteCycles,
    ];
}

impl fmt::Display for CommonCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A counter set that a device really offers, with the counters it has
/// (Metal's `MTLCounterSet`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct CounterSet {
    /// Which common set this is.
    pub set: CommonCounterSet,
    /// The counters the device can produce in this set.
    pub counters: Vec<CommonCounter>,
}

impl CounterSet {
    /// The set's name (`timestamp`, `statistic`, `stage_utilization`).
    pub fn name(&self) -> &'static str {
        self.set.name()
    }

    /// Whether the set contains `counter`.
    pub fn contains(&self, counter: CommonCounter) -> bool {
        self.counters.contains(&counter)
    }
}

/// Where in the work a device can sample counters (Metal's
/// `MTLCounterSamplingPoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub enum CounterSamplingPoint {
    /// At the start and end of pipeline stages of a pass (pass attachments).
    #[cfg_attr(feature = "serde", serde(rename = "stage"))]
    AtStageBoundary,
    /// Between draw calls inside a render encoder.
    #[cfg_attr(feature = "serde", serde(rename = "draw"))]
    AtDrawBoundary,
    /// Between dispatches inside a compute encoder.
    #[cfg_attr(feature = "serde", serde(rename = "dispatch"))]
    AtDispatchBoundary,
    /// Between tile dispatches (Apple tile shaders); never offered on Vulkan.
    #[cfg_attr(feature = "serde", serde(rename = "tile_dispatch"))]
    AtTileDispatchBoundary,
    /// Between blit (transfer) commands.
    #[cfg_attr(feature = "serde", serde(rename = "blit"))]
    AtBlitBoundary,
}

impl CounterSamplingPoint {
    /// Every sampling point, in Metal's order.
    pub const ALL: [CounterSamplingPoint; 5] = [
        CounterSamplingPoint::AtStageBoundary,
        CounterSamplingPoint::AtDrawBoundary,
        CounterSamplingPoint::AtDispatchBoundary,
        CounterSamplingPoint::AtTileDispatchBoundary,
        CounterSamplingPoint::AtBlitBoundary,
    ];

    /// The point's short name: `stage`, `draw`, `dispatch`, `tile_dispatch`, `blit`.
    pub fn name(self) -> &'static str {
        match self {
            CounterSamplingPoint::AtStageBoundary => "stage",
            CounterSamplingPoint::AtDrawBoundary => "draw",
            CounterSamplingPoint::AtDispatchBoundary => "dispatch",
            CounterSamplingPoint::AtTileDispatchBoundary => "tile_dispatch",
            CounterSamplingPoint::AtBlitBoundary => "blit",
        }
    }
}

impl fmt::Display for CounterSamplingPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
