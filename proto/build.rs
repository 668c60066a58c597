//! Generates the tonic/prost bindings from `cronstable/v1/cronstable.proto` at build time.
//!
//! protoc comes from `PROTOC` or `PATH` when one is there (Debian's `protobuf-compiler`, which
//! etcd-client's own build needs too); otherwise from the `protoc-bin-vendored` crate, so a
//! fresh machine with only the Rust toolchain can build and run the demo.

use std::path::PathBuf;

fn protoc_on_path() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("protoc").is_file()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=cronstable/v1/cronstable.proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
    let mut config = prost_build::Config::new();
    if std::env::var_os("PROTOC").is_none() && !protoc_on_path() {
        let vendored: PathBuf = protoc_bin_vendored::protoc_bin_path()
            .map_err(|e| format!("no protoc on PATH and no vendored one for this platform ({e}); install Debian's protobuf-compiler"))?;
        config.protoc_executable(vendored);
    }
    tonic_prost_build::configure().compile_with_config(
        config,
        &["cronstable/v1/cronstable.proto"],
        &["."],
    )?;
    Ok(())
}
