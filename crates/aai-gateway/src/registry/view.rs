//! A client's view of the snapshot: the apps and tools config `clients` lets it see
//! (`crate::visibility` holds the rules). What it may not see is left out of the view: not
//! listed, searched, guided or callable, and asked for by id it gets the error of an app
//! that does not exist (its name is not even suggested), so nothing leaks.

use super::Snapshot;
use crate::visibility::Visibility;

/// `snapshot` as `client` sees it, or `None` when no rule applies to it (it sees all).
pub(crate) fn view(visibility: &Visibility, snapshot: &Snapshot, client: &str) -> Option<Snapshot> {
    if !visibility.limits(client) {
        return None;
    }
    Some(snapshot.filtered(
        |id: &str| visibility.app(client, id),
        |id: &str, names: &[&str]| names.iter().all(|n| visibility.tool(client, id, n)),
    ))
}
