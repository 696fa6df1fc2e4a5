//! `--discover [--yes] [--force] [--all] [--json]`: the summary first, then write on
//! confirmation (a TTY prompt) or `--yes`. Progress goes to stderr.
//!
//! Where apps are found: on Linux the D-Bus session bus (`aai_author::dbus`); on macOS
//! the scriptable bundles under `/Applications` and `~/Applications` (their `.sdef`,
//! `aai_author::sdef`).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use super::Context;
use super::drafts::{self, Found, Plan, present};

/// Options of `--discover`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Options {
    pub yes: bool,
    pub force: bool,
    pub all: bool,
    pub json: bool,
}

impl From<Options> for super::drafts::Options {
    fn from(o: Options) -> Self {
        super::drafts::Options {
            yes: o.yes,
            force: o.force,
            json: o.json,
        }
    }
}

pub(super) fn run(ctx: &Context, opts: Options) -> ExitCode {
    let gathered = match crate::host::Host::current().os() {
        crate::host::Os::Macos => Ok(bundles(ctx, opts)),
        crate::host::Os::Windows => automation_servers(ctx),
        #[cfg(target_os = "linux")]
        crate::host::Os::Linux => bus(ctx, opts),
        other => Err(format!(
            "--discover knows no way to find apps on {}",
            other.as_str()
        )),
    };
    match gathered {
        Ok((found, not_running)) => {
            present(ctx, opts.into(), &found, &not_running, &mut |_| Ok(()))
        }
        Err(e) => fail(&e),
    }
}

/// The session bus's services, introspected.
#[cfg(target_os = "linux")]
fn bus(ctx: &Context, opts: Options) -> Result<(Vec<Found>, Vec<String>), String> {
    use aai_author::dbus as generate;
    let runtime = super::runtime()?;
    let names = match runtime.block_on(crate::catalog::bus::owned_names()) {
        Ok(n) => n,
        Err(e) => {
            return Err(format!(
                "cannot reach the D-Bus session bus ({e}). --discover finds apps on the desktop session's bus: run it inside your desktop session, or set DBUS_SESSION_BUS_ADDRESS (e.g. `unix:path=$XDG_RUNTIME_DIR/bus`); `aai-gateway import openapi|mcp` and `--generate` make descriptors without a bus."
            ));
        }
    };
    let activatable: Vec<String> = crate::catalog::builtin::session_bus_names()
        .into_iter()
        .filter(|n| !names.contains(n) && (opts.all || !generate::is_plumbing(n)))
        .collect();
    let candidates: Vec<&String> = names
        .iter()
        .filter(|n| opts.all || !generate::is_plumbing(n))
        .collect();
    let mut found = Vec::new();
    // Progress on one overwritten line, only where a person watches.
    let tty = std::io::stderr().is_terminal();
    for (i, service) in candidates.iter().enumerate() {
        if tty {
            eprint!(
                "\r\x1b[2Kintrospecting {}/{}: {service}",
                i + 1,
                candidates.len()
            );
        }
        let objects = runtime
            .block_on(crate::catalog::bus::describe_service(service, 200))
            .unwrap_or_default();
        let doc = generate::descriptor(service, &objects);
        let text = doc
            .as_ref()
            .map(|d| format!("{}\n", serde_json::to_string_pretty(d).expect("JSON")));
        let plan = match &text {
            // The built-in app for this name is richer than a generated one, and a file
            // on disk would shadow it.
            Some(_) if !opts.all && crate::catalog::builtin::watches(service) => Plan::BuiltIn,
            Some(t) => drafts::plan(&ctx.home.join(service.as_str()), t),
            None => Plan::Empty,
        };
        if tty && i + 1 == candidates.len() {
            eprint!("\r\x1b[2K");
        }
        found.push(Found {
            id: (*service).clone(),
            summary: doc.as_ref().map(generate::summary).unwrap_or_default(),
            text,
            plan,
            notes: Vec::new(),
            secrets: Vec::new(),
            file: None,
        });
    }
    Ok((found, activatable))
}

/// The scriptable app bundles under `/Applications` (re-rooted by `AAI_SYSTEM_ROOT`) and
/// `~/Applications`: a draft from each one's scripting definition. Nothing is launched.
fn bundles(ctx: &Context, opts: Options) -> (Vec<Found>, Vec<String>) {
    let mut dirs = vec![crate::catalog::paths::system_root().join("Applications")];
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        dirs.push(std::path::PathBuf::from(home).join("Applications"));
    }
    let builtin = crate::catalog::builtin::macos_ids();
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut apps: Vec<std::path::PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "app"))
            .collect();
        apps.sort();
        for app in apps {
            let Some(info) = bundle_info(&app) else {
                continue;
            };
            let Some(sdef) = &info.sdef else {
                continue; // not scriptable
            };
            let source = match std::fs::read_to_string(sdef) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("{}: {e}", sdef.display());
                    continue;
                }
            };
            let (text, summary, plan) = match aai_author::sdef::draft(&info.id, &info.name, &source)
            {
                Ok(Some(draft)) => {
                    let tools = draft.descriptor["platforms"]["macos"]["tools"]
                        .as_array()
                        .map_or(0, Vec::len);
                    let text = format!(
                        "{}\n",
                        serde_json::to_string_pretty(&draft.descriptor).expect("JSON")
                    );
                    let plan = if !opts.all && builtin.contains(&info.id) {
                        Plan::BuiltIn
                    } else {
                        drafts::plan(&ctx.home.join(&info.id), &text)
                    };
                    let summary = format!(
                        "{} from {} ({} left out)",
                        crate::text::count(tools, "tool", "tools"),
                        sdef.file_name().unwrap_or_default().to_string_lossy(),
                        crate::text::count(draft.skipped.len(), "command", "commands"),
                    );
                    (Some(text), summary, plan)
                }
                Ok(None) => (None, "no commands of its own".to_owned(), Plan::Empty),
                Err(e) => (None, e.to_string(), Plan::Invalid),
            };
            found.push(Found {
                id: info.id,
                text,
                summary,
                plan,
                notes: Vec::new(),
                secrets: Vec::new(),
                file: None,
            });
        }
    }
    (found, Vec::new())
}

/// Lists the registered automation servers: ProgIDs whose class has a `LocalServer32` and a
/// `TypeLib`, with the type library's file (`win64`, else `win32`, of the class's library
/// version or the newest, language 0 first). Reads the registry only; starts nothing.
const SERVERS_SCRIPT: &str = r#"$ErrorActionPreference = 'SilentlyContinue'
$root = [Microsoft.Win32.Registry]::ClassesRoot
$out = New-Object System.Collections.Generic.List[object]
foreach ($name in $root.GetSubKeyNames()) {
  if ($name -notmatch '^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$') { continue }
  $key = $root.OpenSubKey($name + '\CLSID')
  if (-not $key) { continue }
  $clsid = [string]$key.GetValue('')
  if (-not $clsid) { continue }
  $class = $root.OpenSubKey('CLSID\' + $clsid)
  if (-not $class -or -not $class.OpenSubKey('LocalServer32')) { continue }
  $tlbKey = $class.OpenSubKey('TypeLib')
  if (-not $tlbKey) { continue }
  $libid = [string]$tlbKey.GetValue('')
  $lib = $root.OpenSubKey('TypeLib\' + $libid)
  if (-not $lib) { continue }
  $want = $class.OpenSubKey('Version')
  $versions = @($lib.GetSubKeyNames())
  if ($want -and $versions -contains [string]$want.GetValue('')) { $version = [string]$want.GetValue('') }
  else { $version = $versions | Sort-Object { try { [version]$_ } catch { [version]'0.0' } } | Select-Object -Last 1 }
  $ver = $lib.OpenSubKey($version)
  if (-not $ver) { continue }
  $path = $null
  foreach ($lcid in (@('0') + @($ver.GetSubKeyNames() | Where-Object { $_ -match '^[0-9a-fA-F]+$' -and $_ -ne '0' }))) {
    foreach ($arch in 'win64', 'win32') {
      $k = $ver.OpenSubKey($lcid + '\' + $arch)
      if ($k -and -not $path) { $path = [string]$k.GetValue('') }
    }
  }
  if (-not $path) { continue }
  $out.Add([pscustomobject]@{ progId = $name; clsid = $clsid; typeLib = $path })
}
[Console]::Out.Write((ConvertTo-Json -InputObject @($out) -Compress -Depth 3))
"#;

/// One registered automation server.
#[derive(Debug, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct Server {
    prog_id: String,
    clsid: String,
    type_lib: String,
}

/// The servers PowerShell listed, one per class: a versioned ProgID
/// (`Outlook.Application.16`) gives way to the version-independent one of its class.
fn servers(listing: &str) -> Result<Vec<Server>, String> {
    let mut all: Vec<Server> = serde_json::from_str(listing.trim())
        .map_err(|e| format!("PowerShell's list of automation servers is not readable: {e}"))?;
    all.sort_by(|a, b| {
        (a.clsid.to_ascii_uppercase(), a.prog_id.len(), &a.prog_id).cmp(&(
            b.clsid.to_ascii_uppercase(),
            b.prog_id.len(),
            &b.prog_id,
        ))
    });
    all.dedup_by(|b, a| a.clsid.eq_ignore_ascii_case(&b.clsid));
    all.sort_by(|a, b| a.prog_id.cmp(&b.prog_id));
    Ok(all)
}

/// The file and resource id of a registered type library path: `…\EXCEL.EXE\3` names
/// the resource 3 of `EXCEL.EXE`.
fn typelib_file(path: &str) -> (std::path::PathBuf, Option<u16>) {
    let plain = std::path::PathBuf::from(path);
    if plain.is_file() {
        return (plain, None);
    }
    if let Some((file, id)) = path.rsplit_once(['\\', '/'])
        && let Ok(id) = id.parse::<u16>()
    {
        return (std::path::PathBuf::from(file), Some(id));
    }
    (plain, None)
}

/// Windows: the registered automation servers, each drafted from its type library.
fn automation_servers(ctx: &Context) -> Result<(Vec<Found>, Vec<String>), String> {
    let runtime = super::runtime()?;
    let args: Vec<String> = crate::exec::com::ARGS
        .iter()
        .map(|a| (*a).to_owned())
        .chain([crate::text::powershell_encoded(SERVERS_SCRIPT)])
        .collect();
    let program = if crate::host::on_path("powershell.exe").is_some() {
        "powershell.exe"
    } else {
        "pwsh"
    };
    let spec = crate::exec::process::Spec {
        program,
        args: &args,
        env: &[],
        base_dir: std::path::Path::new("."),
        label: "--discover",
    };
    let limits = crate::exec::process::Limits {
        deadline: std::time::Duration::from_secs(120),
        max_output: 8 * 1024 * 1024,
        cancel: tokio_util::sync::CancellationToken::new(),
    };
    let output = runtime
        .block_on(crate::exec::process::run(&spec, b"", &limits))
        .map_err(|e| format!("cannot run PowerShell to list the automation servers: {e}"))?;
    if !output.success() {
        return Err(format!(
            "PowerShell could not list the automation servers: {}",
            crate::text::excerpt(&String::from_utf8_lossy(&output.stderr), 300)
        ));
    }
    let mut found = Vec::new();
    for server in servers(&String::from_utf8_lossy(&output.stdout))? {
        let (file, resource) = typelib_file(&server.type_lib);
        let options = aai_author::com::Options {
            prog_id: Some(&server.prog_id),
            clsid: Some(&server.clsid),
        };
        match super::import::typelib_drafts(ctx, &file, resource, options) {
            Ok(drafts) => found.extend(drafts),
            Err(e) => found.push(Found {
                id: server.prog_id.clone(),
                text: None,
                summary: e,
                plan: Plan::Invalid,
                notes: Vec::new(),
                secrets: Vec::new(),
                file: None,
            }),
        }
    }
    Ok((found, Vec::new()))
}

/// What a bundle's `Info.plist` (XML or binary) says.
struct BundleInfo {
    id: String,
    name: String,
    sdef: Option<std::path::PathBuf>,
}

fn bundle_info(app: &std::path::Path) -> Option<BundleInfo> {
    let info = plist::Value::from_file(app.join("Contents").join("Info.plist")).ok()?;
    let dict = info.as_dictionary()?;
    let text = |key: &str| dict.get(key).and_then(plist::Value::as_string);
    let id = text("CFBundleIdentifier")?.to_owned();
    let name = text("CFBundleName")
        .map(str::to_owned)
        .or_else(|| Some(app.file_stem()?.to_string_lossy().into_owned()))?;
    let resources = app.join("Contents").join("Resources");
    // `OSAScriptingDefinition` names the file (a plain name inside Resources only).
    let named = text("OSAScriptingDefinition")
        .filter(|f| !f.contains(['/', '\\']) && *f != ".." && *f != ".")
        .map(|f| resources.join(f))
        .filter(|p| p.is_file());
    let sdef = named.or_else(|| {
        let mut all: Vec<std::path::PathBuf> = std::fs::read_dir(&resources)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "sdef"))
            .collect();
        all.sort();
        all.into_iter().next()
    });
    Some(BundleInfo { id, name, sdef })
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "aai-gateway: {message}");
    ExitCode::from(2)
}
