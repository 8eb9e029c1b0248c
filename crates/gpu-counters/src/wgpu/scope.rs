//! The drop-in's scope guards: a scope over an encoder (borrowed or owned)
//! and scoped compute and render passes. Each ends when dropped (a drop
//! while the thread panics ends it too, and marks it); `end` ends it and
//! returns what went wrong.

use super::frame::{lock, FrameData};
use super::Profiler;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{InvalidInput, Result};
use gpu_counters_profiler::SharedStr;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A begun scope's state, shared by every guard kind.
pub(crate) struct Open<'p> {
    pub(crate) profiler: &'p Profiler,
    pub(crate) frame: Arc<FrameData>,
    /// Its record in the frame.
    pub(crate) id: u32,
    /// Its start timestamp's index (the end's is the next).
    pub(crate) query: Option<u32>,
    /// Its statistics query (passes only).
    pub(crate) statistics: Option<u32>,
    /// A debug group was pushed for it.
    pub(crate) debug_group: bool,
    pub(crate) ended: bool,
}

impl Open<'_> {
    /// Marks the record ended: before its frame ended, or not at all (the
    /// frame counts it as not ended; the error says so).
    fn end_record(&mut self) -> Result<()> {
        self.ended = true;
        let mut state = lock(&self.frame.state);
        let closed = state.closed;
        let rec = &mut state.scopes[self.id as usize];
        if std::thread::panicking() {
            rec.panicked = true;
        }
        if closed {
            return Err(InvalidInput::EncoderState(format!(
                "scope `{}` ended after its frame ended (Profiler::end_frame): it is counted as not ended",
                rec.label
            ))
            .into());
        }
        rec.ended = true;
        Ok(())
    }

    /// Ends a scope over an encoder: its end timestamp, its debug group.
    fn end_on_encoder(&mut self, encoder: &mut wgpu::CommandEncoder) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        if let (Some(q), Some(set)) = (self.query, &self.frame.res.timestamps) {
            encoder.write_timestamp(set, q + 1);
        }
        if self.debug_group {
            encoder.pop_debug_group();
        }
        self.end_record()
    }

    /// A child scope over the same encoder.
    fn child(&self, label: String, encoder: &mut wgpu::CommandEncoder) -> Open<'_> {
        self.profiler.begin_on_encoder(
            SharedStr::from(label),
            Some((self.frame.clone(), self.id)),
            encoder,
        )
    }
}

/// Begins a scoped compute pass on `encoder`, as a child of `parent` (a
/// frame and record) or a root.
pub(crate) fn compute_pass<'a>(
    profiler: &'a Profiler,
    label: String,
    parent: Option<(Arc<FrameData>, u32)>,
    encoder: &'a mut wgpu::CommandEncoder,
) -> ScopedComputePass<'a> {
    let label = SharedStr::from(label);
    let open = profiler.begin(label.clone(), PassKind::Compute, parent, encoder);
    let frame = open.frame.clone();
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(&label),
        timestamp_writes: open
            .query
            .zip(frame.res.timestamps.as_ref())
            .map(|(q, set)| wgpu::ComputePassTimestampWrites {
                query_set: set,
                beginning_of_pass_write_index: Some(q),
                end_of_pass_write_index: Some(q + 1),
            }),
    });
    if open.debug_group {
        pass.push_debug_group(&label);
    }
    if let (Some(i), Some(set)) = (open.statistics, &frame.res.statistics) {
        pass.begin_pipeline_statistics_query(set, i);
    }
    ScopedComputePass { pass, open }
}

/// Begins a scoped render pass on `encoder` with `desc` (whose
/// `timestamp_writes` the scope sets), as a child of `parent` or a root.
pub(crate) fn render_pass<'a>(
    profiler: &'a Profiler,
    label: String,
    parent: Option<(Arc<FrameData>, u32)>,
    encoder: &'a mut wgpu::CommandEncoder,
    desc: wgpu::RenderPassDescriptor<'_>,
) -> ScopedRenderPass<'a> {
    let label = SharedStr::from(label);
    let open = profiler.begin(label.clone(), PassKind::Render, parent, encoder);
    let frame = open.frame.clone();
    let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some(&label),
        timestamp_writes: open
            .query
            .zip(frame.res.timestamps.as_ref())
            .map(|(q, set)| wgpu::RenderPassTimestampWrites {
                query_set: set,
                beginning_of_pass_write_index: Some(q),
                end_of_pass_write_index: Some(q + 1),
            }),
        ..desc
    });
    if open.debug_group {
        pass.push_debug_group(&label);
    }
    if let (Some(i), Some(set)) = (open.statistics, &frame.res.statistics) {
        pass.begin_pipeline_statistics_query(set, i);
    }
    ScopedRenderPass { pass, open }
}

/// A scope over an application's [`wgpu::CommandEncoder`]: timed by
/// timestamps written into the encoder at its start and end (needs
/// [`wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS`]; without it the scope
/// has no time and is counted as failed, its passes are still timed).
///
/// Derefs to the encoder, so encoder calls work on it. Ends when dropped;
/// [`Scope::end`] ends it and says what went wrong. It borrows the encoder,
/// so a scope cannot span two command buffers: the encoder cannot be
/// finished while a scope on it is open.
///
/// A scope leaked with `mem::forget` never ends: its frame counts it as not
/// ended, and its frame's query sets are not reused. With debug groups on,
/// its group stays pushed, and wgpu refuses to finish the encoder (a
/// validation error on the application's device, as for an unpopped
/// `push_debug_group` of the application's own).
///
/// ```compile_fail,E0505
/// # fn f(profiler: &gpu_counters::wgpu::Profiler, device: &wgpu::Device) {
/// let mut encoder = device.create_command_encoder(&Default::default());
/// let scope = profiler.scope("frame", &mut encoder);
/// let commands = encoder.finish(); // error: `encoder` is borrowed by `scope`
/// drop(scope);
/// # }
/// ```
pub struct Scope<'a> {
    encoder: &'a mut wgpu::CommandEncoder,
    open: Open<'a>,
}

impl<'a> Scope<'a> {
    pub(crate) fn new(open: Open<'a>, encoder: &'a mut wgpu::CommandEncoder) -> Self {
        Self { encoder, open }
    }

    /// A scope nested in this one, over the same encoder.
    pub fn scope(&mut self, label: impl Into<String>) -> Scope<'_> {
        let open = self.open.child(label.into(), self.encoder);
        Scope {
            encoder: &mut *self.encoder,
            open,
        }
    }

    /// A compute pass on the encoder, nested in this scope and timed by its
    /// own timestamp writes (and counted by a statistics query where they
    /// are on).
    pub fn scoped_compute_pass(&mut self, label: impl Into<String>) -> ScopedComputePass<'_> {
        let parent = Some((self.open.frame.clone(), self.open.id));
        compute_pass(self.open.profiler, label.into(), parent, self.encoder)
    }

    /// A render pass on the encoder with `desc`, nested in this scope and
    /// timed by its own timestamp writes (the scope sets
    /// `desc.timestamp_writes`; its label is the scope's).
    pub fn scoped_render_pass(
        &mut self,
        label: impl Into<String>,
        desc: wgpu::RenderPassDescriptor<'_>,
    ) -> ScopedRenderPass<'_> {
        let parent = Some((self.open.frame.clone(), self.open.id));
        render_pass(self.open.profiler, label.into(), parent, self.encoder, desc)
    }

    /// Ends the scope, as dropping it does.
    ///
    /// # Errors
    /// `EncoderState` where its frame ended first ([`Profiler::end_frame`]
    /// while the scope was open): the scope is counted as not ended.
    pub fn end(mut self) -> Result<()> {
        self.open.end_on_encoder(self.encoder)
    }
}

impl Deref for Scope<'_> {
    type Target = wgpu::CommandEncoder;
    fn deref(&self) -> &wgpu::CommandEncoder {
        self.encoder
    }
}

impl DerefMut for Scope<'_> {
    fn deref_mut(&mut self) -> &mut wgpu::CommandEncoder {
        self.encoder
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        // A scope ended late is counted by its frame (see `end`).
        let _ = self.open.end_on_encoder(self.encoder);
    }
}

impl std::fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("frame", &self.open.frame.index)
            .field("record", &self.open.id)
            .finish()
    }
}

/// A scope that owns its [`wgpu::CommandEncoder`] (as [`Scope`] otherwise):
/// [`OwningScope::into_inner`] ends it and gives the encoder back.
pub struct OwningScope<'p> {
    encoder: wgpu::CommandEncoder,
    open: Open<'p>,
}

impl<'p> OwningScope<'p> {
    pub(crate) fn new(open: Open<'p>, encoder: wgpu::CommandEncoder) -> Self {
        Self { encoder, open }
    }

    /// A scope nested in this one, over its encoder.
    pub fn scope(&mut self, label: impl Into<String>) -> Scope<'_> {
        let open = self.open.child(label.into(), &mut self.encoder);
        Scope {
            encoder: &mut self.encoder,
            open,
        }
    }

    /// As [`Scope::scoped_compute_pass`].
    pub fn scoped_compute_pass(&mut self, label: impl Into<String>) -> ScopedComputePass<'_> {
        let parent = Some((self.open.frame.clone(), self.open.id));
        compute_pass(self.open.profiler, label.into(), parent, &mut self.encoder)
    }

    /// As [`Scope::scoped_render_pass`].
    pub fn scoped_render_pass(
        &mut self,
        label: impl Into<String>,
        desc: wgpu::RenderPassDescriptor<'_>,
    ) -> ScopedRenderPass<'_> {
        let parent = Some((self.open.frame.clone(), self.open.id));
        render_pass(
            self.open.profiler,
            label.into(),
            parent,
            &mut self.encoder,
            desc,
        )
    }

    /// Ends the scope and gives the encoder back, with what went wrong in
    /// ending (as [`Scope::end`]).
    pub fn end(mut self) -> (wgpu::CommandEncoder, Result<()>) {
        let result = self.open.end_on_encoder(&mut self.encoder);
        let encoder = self.into_inner();
        (encoder, result)
    }

    /// Ends the scope (as dropping it does) and gives the encoder back.
    pub fn into_inner(mut self) -> wgpu::CommandEncoder {
        let _ = self.open.end_on_encoder(&mut self.encoder);
        let device = self.open.profiler.device();
        // The guard's drop finds it ended; the encoder left in it is an
        // empty one of the device's, never submitted.
        std::mem::replace(
            &mut self.encoder,
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpu-counters ended owning scope"),
            }),
        )
    }
}

impl Deref for OwningScope<'_> {
    type Target = wgpu::CommandEncoder;
    fn deref(&self) -> &wgpu::CommandEncoder {
        &self.encoder
    }
}

impl DerefMut for OwningScope<'_> {
    fn deref_mut(&mut self) -> &mut wgpu::CommandEncoder {
        &mut self.encoder
    }
}

impl Drop for OwningScope<'_> {
    fn drop(&mut self) {
        let _ = self.open.end_on_encoder(&mut self.encoder);
    }
}

impl std::fmt::Debug for OwningScope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwningScope")
            .field("frame", &self.open.frame.index)
            .field("record", &self.open.id)
            .finish()
    }
}

/// A compute pass that is a scope, timed by the pass's own timestamp writes
/// (needs only [`wgpu::Features::TIMESTAMP_QUERY`]) and, where the
/// profiler's statistics are on, counted by a pipeline-statistics query.
/// Derefs to the [`wgpu::ComputePass`]; ends (and ends the pass) when
/// dropped.
pub struct ScopedComputePass<'a> {
    pass: wgpu::ComputePass<'a>,
    open: Open<'a>,
}

/// A render pass that is a scope: as [`ScopedComputePass`], over a
/// [`wgpu::RenderPass`].
pub struct ScopedRenderPass<'a> {
    pass: wgpu::RenderPass<'a>,
    open: Open<'a>,
}

macro_rules! pass_guard {
    ($guard:ident, $pass:ty) => {
        impl<'a> $guard<'a> {
            /// Closes what the scope opened in the pass (its statistics
            /// query, its debug group) and marks it ended; the pass writes
            /// the end timestamp when it ends.
            fn finish(&mut self) -> Result<()> {
                if self.open.ended {
                    return Ok(());
                }
                if self.open.statistics.is_some() {
                    self.pass.end_pipeline_statistics_query();
                }
                if self.open.debug_group {
                    self.pass.pop_debug_group();
                }
                self.open.end_record()
            }

            /// Ends the scope and the pass, as dropping it does.
            ///
            /// # Errors
            /// As [`Scope::end`].
            pub fn end(mut self) -> Result<()> {
                self.finish()
            }

            /// A scope inside the pass, timed by timestamps written in the
            /// pass (needs [`wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES`];
            /// without it the scope is counted as failed).
            pub fn scope(&mut self, label: impl Into<String>) -> PassScope<'_, $pass> {
                PassScope::begin(&self.open, label.into(), &mut self.pass)
            }
        }

        impl<'a> Deref for $guard<'a> {
            type Target = $pass;
            fn deref(&self) -> &$pass {
                &self.pass
            }
        }

        impl<'a> DerefMut for $guard<'a> {
            fn deref_mut(&mut self) -> &mut $pass {
                &mut self.pass
            }
        }

        impl Drop for $guard<'_> {
            fn drop(&mut self) {
                let _ = self.finish();
            }
        }

        impl std::fmt::Debug for $guard<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($guard))
                    .field("frame", &self.open.frame.index)
                    .field("record", &self.open.id)
                    .finish()
            }
        }
    };
}

pass_guard!(ScopedComputePass, wgpu::ComputePass<'a>);
pass_guard!(ScopedRenderPass, wgpu::RenderPass<'a>);

/// A pass whose commands a scope inside it brackets (wgpu's compute and
/// render passes).
pub trait PassCommands {
    /// The pass's `write_timestamp`.
    fn write_timestamp(&mut self, set: &wgpu::QuerySet, index: u32);
    /// The pass's `push_debug_group`.
    fn push_debug_group(&mut self, label: &str);
    /// The pass's `pop_debug_group`.
    fn pop_debug_group(&mut self);
}

macro_rules! pass_commands {
    ($pass:ty) => {
        impl PassCommands for $pass {
            fn write_timestamp(&mut self, set: &wgpu::QuerySet, index: u32) {
                <$pass>::write_timestamp(self, set, index)
            }
            fn push_debug_group(&mut self, label: &str) {
                <$pass>::push_debug_group(self, label)
            }
            fn pop_debug_group(&mut self) {
                <$pass>::pop_debug_group(self)
            }
        }
    };
}

pass_commands!(wgpu::ComputePass<'_>);
pass_commands!(wgpu::RenderPass<'_>);

/// A scope inside a pass ([`ScopedComputePass::scope`],
/// [`ScopedRenderPass::scope`]): derefs to the pass, ends when dropped.
pub struct PassScope<'a, P: PassCommands> {
    pass: &'a mut P,
    open: Open<'a>,
}

impl<'a, P: PassCommands> PassScope<'a, P> {
    fn begin(parent: &'a Open<'_>, label: String, pass: &'a mut P) -> Self {
        let label = SharedStr::from(label);
        let open = parent
            .profiler
            .begin_in_pass(label.clone(), (parent.frame.clone(), parent.id));
        if open.debug_group {
            pass.push_debug_group(&label);
        }
        if let (Some(q), Some(set)) = (open.query, &open.frame.res.timestamps) {
            pass.write_timestamp(set, q);
        }
        Self { pass, open }
    }

    fn finish(&mut self) -> Result<()> {
        if self.open.ended {
            return Ok(());
        }
        if let (Some(q), Some(set)) = (self.open.query, &self.open.frame.res.timestamps) {
            self.pass.write_timestamp(set, q + 1);
        }
        if self.open.debug_group {
            self.pass.pop_debug_group();
        }
        self.open.end_record()
    }

    /// A scope nested in this one, in the same pass.
    pub fn scope(&mut self, label: impl Into<String>) -> PassScope<'_, P> {
        PassScope::begin(&self.open, label.into(), self.pass)
    }

    /// Ends the scope, as dropping it does.
    ///
    /// # Errors
    /// As [`Scope::end`].
    pub fn end(mut self) -> Result<()> {
        self.finish()
    }
}

impl<P: PassCommands> Deref for PassScope<'_, P> {
    type Target = P;
    fn deref(&self) -> &P {
        self.pass
    }
}

impl<P: PassCommands> DerefMut for PassScope<'_, P> {
    fn deref_mut(&mut self) -> &mut P {
        self.pass
    }
}

impl<P: PassCommands> Drop for PassScope<'_, P> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

impl<P: PassCommands> std::fmt::Debug for PassScope<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassScope")
            .field("frame", &self.open.frame.index)
            .field("record", &self.open.id)
            .finish()
    }
}
