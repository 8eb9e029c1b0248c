//! `gpu-counters record`'s parts that need no GPU.
//!
//! - [`protocol`]: the frames and records the injected library sends to the
//!   collector, encoded and decoded with every length checked.
//! - [`client`]: the injection's side of the connection: a bounded process
//!   queue with counted drops, a sender that connects lazily and sends
//!   numbered frames, and a sender thread.
//! - [`synthetic`]: scripted record streams for tests and benchmarks.
//! - [`vk_layer`]: the Vulkan layer's name and loader manifest.
//! - `collector` (feature `collector`, default): the private directory and
//!   listening socket, a reader thread per connection, a bounded channel to
//!   one writer thread that streams the Perfetto GPU trace and aggregates
//!   the summary in bounded memory.
//! - `process` (feature `collector`): running the recorded command with
//!   its signals forwarded and its exit status reported as a shell would.
//! - `summary` (feature `collector`): the summary printed at the end, as
//!   text or JSON.

pub mod client;
pub mod protocol;
pub mod synthetic;
pub mod vk_layer;

#[cfg(feature = "collector")]
pub mod collector;
#[cfg(feature = "collector")]
pub mod process;
#[cfg(feature = "collector")]
mod session;
#[cfg(feature = "collector")]
pub mod summary;
#[cfg(feature = "collector")]
mod trace;
