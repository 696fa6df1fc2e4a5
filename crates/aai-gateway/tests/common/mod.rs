//! What several test binaries share: writing descriptors into a home folder and scanning
//! it the way the gateway does.

#![allow(dead_code)]

use std::path::Path;

use aai_gateway::testing::catalog::{Layout, SearchDir, SourceKind};
use aai_gateway::testing::host::{Host, Os};
use aai_gateway::testing::registry::Snapshot;
use serde_json::Value;

/// Writes `doc` to `home/<its app id>/aai.json`.
pub(crate) fn put(home: &Path, doc: &Value) {
    let id = doc["app"]["id"]
        .as_str()
        .expect("the descriptor has an app id");
    let dir = home.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("aai.json"), doc.to_string()).unwrap();
}

/// `home` as the only search directory (no system paths).
pub(crate) fn dirs(home: &Path) -> Vec<SearchDir> {
    vec![SearchDir {
        kind: SourceKind::User,
        dir: home.to_owned(),
        layout: Layout::AppDirs,
    }]
}

/// One scan of `home` as a Linux machine serves it; a broken descriptor fails the test.
pub(crate) fn snapshot_of(home: &Path, locale: Option<&str>) -> Snapshot {
    let catalog = aai_gateway::testing::catalog::load(&dirs(home), &Default::default());
    assert!(
        catalog.diagnostics.iter().all(|d| !d.is_error()),
        "{:?}",
        catalog.diagnostics
    );
    Snapshot::build(catalog, &Host::new(Os::Linux), locale.map(str::to_owned))
}
