//! Compiles the web UI's files (`ui/assets/`) into the crate: for each file its bytes,
//! its gzip form (made here, once, so no request compresses) and an ETag, as a table in
//! `$OUT_DIR/assets.rs` that `src/assets.rs` includes. Never needs a JavaScript tool.

use std::{
    collections::hash_map::DefaultHasher,
    fs,
    hash::{Hash, Hasher},
    io::Write,
    path::{Path, PathBuf},
};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("assets");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let mut table = String::from("&[\n");
    for file in files {
        let rel = file
            .strip_prefix(&root)
            .expect("walked under root")
            .to_string_lossy()
            .replace('\\', "/");
        // Editor leftovers never ship.
        if rel.split('/').any(|part| part.starts_with('.')) || rel.ends_with('~') {
            continue;
        }
        println!("cargo:rerun-if-changed={}", file.display());
        let bytes = fs::read(&file).expect("asset readable");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&bytes).expect("gzip in memory");
        let gz = gz.finish().expect("gzip in memory");
        let gz_path = out_dir.join("assets").join(format!("{rel}.gz"));
        fs::create_dir_all(gz_path.parent().expect("has a parent")).expect("out dir writable");
        fs::write(&gz_path, &gz).expect("out dir writable");
        let mut h = DefaultHasher::new();
        bytes.hash(&mut h);
        table.push_str(&format!(
            "    Asset {{ path: {rel:?}, raw: include_bytes!({raw:?}), gzip: include_bytes!({gz:?}), etag: \"\\\"{etag:016x}\\\"\" }},\n",
            raw = file.display().to_string(),
            gz = gz_path.display().to_string(),
            etag = h.finish(),
        ));
    }
    table.push(']');
    fs::write(out_dir.join("assets.rs"), table).expect("out dir writable");
}
