//! Links the layer with `-Bsymbolic-functions`: its calls of its own
//! exported functions (`vkGetInstanceProcAddr`, ...) stay its own, not the
//! Vulkan loader's functions of the same names, which the process loaded
//! first.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
    }
}
