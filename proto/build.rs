//! Generates the tonic/prost bindings from `cronstable/v1/cronstable.proto` at build time.
//! Needs `protoc` (Debian's `protobuf-compiler`) on PATH or in `PROTOC`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=cronstable/v1/cronstable.proto");
    tonic_prost_build::configure().compile_protos(&["cronstable/v1/cronstable.proto"], &["."])?;
    Ok(())
}
