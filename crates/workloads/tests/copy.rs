//! The copy workload copies exactly `bytes` bytes.

mod common;

use ash::vk;
use common::Gpu;
use gpu_counters_workloads::CopyWorkload;

#[test]
fn copy_moves_the_filled_bytes() {
    let gpu = Gpu::new();
    let device = &gpu.device;
    for bytes in [4u64, 1024, 1 << 20, 4096 + 4] {
        let mut workload = CopyWorkload::new(&gpu.ctx(), bytes).expect("CopyWorkload::new");
        assert_eq!(workload.bytes(), bytes);
        let readback = gpu.host_buffer(bytes);
        gpu.submit_and_wait(|cmd| {
            // SAFETY: `cmd` is a recording command buffer of `device` (the harness
            // begins it), outside any render pass, and the harness waits for it to
            // finish before the workload is destroyed.
            unsafe {
                workload.record_fill(device, cmd, 0xA5C3_0F1E);
                workload.record_copy(device, cmd);
                workload.record_barrier(device, cmd);
            }
            // SAFETY: recording outside a render pass; live buffers; the
            // barrier above orders the copy's write before this read.
            unsafe {
                device.cmd_copy_buffer(
                    cmd,
                    workload.dst_buffer(),
                    readback.buffer,
                    &[vk::BufferCopy {
                        src_offset: 0,
                        dst_offset: 0,
                        size: bytes,
                    }],
                );
            }
            gpu.record_transfer_to_host(cmd);
        });
        let words: &[u32] = bytemuck::cast_slice(readback.bytes());
        assert_eq!(words.len() as u64, bytes / 4);
        assert!(words.iter().all(|&w| w == 0xA5C3_0F1E), "bytes {bytes}");
        readback.destroy(device);
        // SAFETY: the submission finished.
        unsafe { workload.destroy(device) };
    }
    gpu.finish();
}
