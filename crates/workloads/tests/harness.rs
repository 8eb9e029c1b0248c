//! The test harness really has the validation layer on and records its
//! errors, so the "no validation messages" checks of the other tests mean
//! something.

mod common;

use ash::vk;
use common::{Gpu, MESSAGES};

#[test]
fn validation_errors_are_recorded() {
    let gpu = Gpu::new();
    // Invalid on purpose: VUID-VkBufferCreateInfo-size-00912 (size 0). The
    // layer reports it and does not pass the call on to the driver.
    let info = vk::BufferCreateInfo::default()
        .size(0)
        .usage(vk::BufferUsageFlags::TRANSFER_DST);
    // SAFETY: deliberately invalid; the validation layer intercepts it.
    let result = unsafe { gpu.device.create_buffer(&info, None) };
    if let Ok(buffer) = result {
        // SAFETY: if a driver did create it, it is destroyed right away.
        unsafe { gpu.device.destroy_buffer(buffer, None) };
    }
    let messages = std::mem::take(&mut *MESSAGES.lock().unwrap_or_else(|e| e.into_inner()));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("VUID-VkBufferCreateInfo-size-00912")),
        "the validation layer did not report a zero-sized buffer; messages: {messages:?}"
    );
    gpu.finish();
}
