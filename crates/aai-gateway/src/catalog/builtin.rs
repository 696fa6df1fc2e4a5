//! Descriptors compiled into the binary for common freedesktop interfaces, active only
//! when their service is on the session bus (owned, or activatable):
//!
//! * `org.freedesktop.Notifications` — desktop notifications (GNOME, KDE, dunst, mako…);
//! * `org.mpris.MediaPlayer2.<player>` — one app per running MPRIS media player, from a
//!   template (play, pause, toggle, next, previous, seek, set position, status, position,
//!   current track, volume).
//!
//! They have the lowest precedence: a descriptor for the same id anywhere else wins.

use std::path::PathBuf;

use aai_descriptor::App;

use crate::catalog::{Catalog, Loaded, SourceKind};

const NOTIFICATIONS: &str = include_str!("../../builtin/notifications.json");
const MPRIS: &str = include_str!("../../builtin/mpris.json");
const MPRIS_PREFIX: &str = "org.mpris.MediaPlayer2.";

/// The built-in apps that apply, given the session bus's owned and activatable names.
pub fn apps(names: &[String]) -> Vec<(App, PathBuf)> {
    let mut out = Vec::new();
    if names.iter().any(|n| n == "org.freedesktop.Notifications") {
        out.push(parse(NOTIFICATIONS, "builtin:notifications"));
    }
    let mut players: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix(MPRIS_PREFIX))
        .filter(|p| !p.is_empty())
        .collect();
    players.sort_unstable();
    players.dedup();
    for player in players {
        out.push(parse(
            &MPRIS.replace("PLAYER", player),
            &format!("builtin:mpris/{player}"),
        ));
    }
    out
}

fn parse(text: &str, source: &str) -> (App, PathBuf) {
    let parsed = aai_descriptor::parse(text, source);
    let app = parsed.app.unwrap_or_else(|| {
        panic!(
            "built-in descriptor {source} is invalid: {:?}",
            parsed.diagnostics
        )
    });
    (app, PathBuf::from(source))
}

/// Whether a bus name decides which built-in apps are active.
pub fn watches(name: &str) -> bool {
    name == "org.freedesktop.Notifications" || name.starts_with(MPRIS_PREFIX)
}

/// Adds built-in apps whose ids no descriptor on disk took.
pub fn add_to(catalog: &mut Catalog, apps: Vec<(App, PathBuf)>) {
    for (app, source) in apps {
        if catalog.apps.iter().any(|l| l.app.id == app.id) {
            continue;
        }
        let binding_sources = vec![source; app.bindings.len()];
        catalog.apps.push(Loaded {
            app,
            kind: SourceKind::BuiltIn,
            binding_sources,
        });
    }
    catalog.apps.sort_by(|a, b| a.app.id.cmp(&b.app.id));
}

/// The session bus's owned and activatable names; empty when there is no session bus.
/// Blocks (at most about two seconds). It runs the query on a thread and runtime of its
/// own, so it is safe from any context, a runtime worker included.
pub fn session_bus_names() -> Vec<String> {
    #[cfg(target_os = "linux")]
    {
        let query = || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    crate::catalog::bus::session_names(),
                )
                .await
                .ok()
            })
        };
        std::thread::scope(|s| s.spawn(query).join().ok().flatten()).unwrap_or_default()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_follow_the_bus() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(apps(&names(&[":1.4", "org.example.Other"])).is_empty());
        let found = apps(&names(&[
            "org.freedesktop.Notifications",
            "org.mpris.MediaPlayer2.vlc",
            "org.mpris.MediaPlayer2.mpv",
            "org.mpris.MediaPlayer2.mpv",
        ]));
        let ids: Vec<&str> = found.iter().map(|(a, _)| a.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "org.freedesktop.Notifications",
                "org.mpris.MediaPlayer2.mpv",
                "org.mpris.MediaPlayer2.vlc"
            ]
        );
        let (mpv, source) = &found[1];
        assert_eq!(mpv.name.primary(), "Media player (mpv)");
        assert_eq!(source, &PathBuf::from("builtin:mpris/mpv"));
        let aai_descriptor::Executor::Dbus(d) = &mpv.bindings[0].executor else {
            panic!()
        };
        assert_eq!(d.service, "org.mpris.MediaPlayer2.mpv");
    }
}
