//! Who is on the other end of a loopback connection: loopback is not an identity (every
//! user of the machine can reach `127.0.0.1`), so the listener asks the OS which user owns
//! the client's socket and serves only the gateway's own user.
//!
//! * Linux: the socket tables `/proc/net/tcp` and `/proc/net/tcp6` list every TCP socket
//!   of the machine's network namespace with its local and remote address and its owner's
//!   uid; the client's socket is the one whose local address is the connection's peer and
//!   whose remote address is the listener's side.
//! * macOS: `lsof` lists the client's socket with its owner's uid.
//! * Windows: PowerShell's `Get-NetTCPConnection` names the process that owns the
//!   client's socket, and `Win32_Process.GetOwner` its user.
//!
//! macOS and Windows were not run here: their command boundaries (`lsof`,
//! `powershell.exe`) are tested with recording fakes. A lookup that fails leaves the peer
//! unproven, and the listener then requires its token.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What the OS says of a connection's peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// A process of this user.
    Owner,
    /// A process of another user (its uid).
    Other(u32),
    /// Not known: another OS, another machine, or the tables could not be read.
    Unknown,
}

/// Who owns the client side of the connection from `remote` to our `local` address.
pub(crate) fn of(local: SocketAddr, remote: SocketAddr) -> Peer {
    #[cfg(target_os = "linux")]
    {
        let Some(me) = my_uid() else {
            return Peer::Unknown;
        };
        let tables = ["/proc/net/tcp", "/proc/net/tcp6"];
        for table in tables {
            if let Ok(text) = std::fs::read_to_string(table)
                && let Some(uid) = owner_in(&text, remote, local)
            {
                return if uid == me {
                    Peer::Owner
                } else {
                    Peer::Other(uid)
                };
            }
        }
        Peer::Unknown
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (local, remote);
        Peer::Unknown
    }
}

/// Who owns the client side of the connection, asked the way the host's OS allows:
/// Linux reads its socket tables; macOS asks `lsof` for the socket whose local address is
/// the client's; Windows asks PowerShell (`Get-NetTCPConnection` for the owning process,
/// then that process's owner, compared with the gateway's user). A lookup that fails or
/// says nothing is `Unknown`.
pub(crate) async fn owner(local: SocketAddr, remote: SocketAddr, os: crate::host::Os) -> Peer {
    match os {
        crate::host::Os::Linux => of(local, remote),
        crate::host::Os::Macos => macos(local, remote).await,
        crate::host::Os::Windows => windows(local, remote).await,
        crate::host::Os::Other => Peer::Unknown,
    }
}

/// [`owner`] on this host, as the sign-in's loopback callback asks it
/// ([`crate::auth::oauth::OwnerOf`]).
pub(crate) fn of_callback(
    local: SocketAddr,
    remote: SocketAddr,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::auth::oauth::Owner> + Send>> {
    use crate::auth::oauth::Owner;
    Box::pin(async move {
        match owner(local, remote, crate::host::Host::current().os()).await {
            Peer::Owner => Owner::Me,
            Peer::Other(uid) => Owner::Other(uid),
            Peer::Unknown => Owner::Unknown,
        }
    })
}

/// Whether `os` can tell who owns a loopback peer.
pub(crate) fn provable_on(os: crate::host::Os) -> bool {
    matches!(
        os,
        crate::host::Os::Linux | crate::host::Os::Macos | crate::host::Os::Windows
    )
}

/// How long asking the OS may take before the peer counts as unknown.
const LOOKUP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs one lookup program; its stdout when it succeeded.
async fn ask(program: &str, args: &[String], env: &[(String, String)]) -> Option<String> {
    let spec = crate::exec::process::Spec {
        program,
        args,
        env,
        base_dir: std::path::Path::new("/"),
        label: "peer lookup",
    };
    let limits = crate::exec::process::Limits {
        deadline: LOOKUP_DEADLINE,
        max_output: 64 * 1024,
        cancel: tokio_util::sync::CancellationToken::new(),
    };
    let output = crate::exec::process::run(&spec, b"", &limits).await.ok()?;
    output
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// macOS: `lsof -nP -a -iTCP@<client address> -sTCP:ESTABLISHED -F pun` lists the sockets
/// with that endpoint; the client's is the one whose name starts with its own address.
async fn macos(local: SocketAddr, remote: SocketAddr) -> Peer {
    let args = [
        "-nP".to_owned(),
        "-a".to_owned(),
        format!("-iTCP@{}", lsof_address(remote)),
        "-sTCP:ESTABLISHED".to_owned(),
        "-F".to_owned(),
        "pun".to_owned(),
    ];
    let Some(listing) = ask("lsof", &args, &[]).await else {
        return Peer::Unknown;
    };
    let _ = local;
    match client_uid(&listing, remote) {
        #[cfg(unix)]
        Some(uid) if uid == nix::unistd::getuid().as_raw() => Peer::Owner,
        Some(uid) => Peer::Other(uid),
        None => Peer::Unknown,
    }
}

/// `127.0.0.1:53211` or `[::1]:53211`, as lsof writes and reads them.
fn lsof_address(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("{}:{}", a.ip(), a.port()),
        SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
    }
}

/// The uid (`u…` field) of the socket whose name (`n…` field) starts with `client->`, in
/// `lsof -F pun` output.
pub(crate) fn client_uid(listing: &str, client: SocketAddr) -> Option<u32> {
    let prefix = format!("{}->", lsof_address(client));
    let mut uid = None;
    for line in listing.lines() {
        match line.split_at_checked(1) {
            Some(("p", _)) => uid = None,
            Some(("u", value)) => uid = value.parse().ok(),
            Some(("n", name)) if name.starts_with(&prefix) => return uid,
            _ => {}
        }
    }
    None
}

/// Windows: a fixed PowerShell script (the ports travel as environment variables, never
/// as code) prints `owner` or `other`.
async fn windows(local: SocketAddr, remote: SocketAddr) -> Peer {
    const SCRIPT: &str = r#"$ErrorActionPreference = 'Stop'
$c = Get-NetTCPConnection -LocalPort ([int]$env:AAI_PEER_PORT) -RemotePort ([int]$env:AAI_OWN_PORT) -State Established | Select-Object -First 1
$p = Get-CimInstance Win32_Process -Filter ("ProcessId=" + [int]$c.OwningProcess)
$o = Invoke-CimMethod -InputObject $p -MethodName GetOwner
$me = [System.Security.Principal.WindowsIdentity]::GetCurrent().Name
if (("{0}\{1}" -f $o.Domain, $o.User) -eq $me) { 'owner' } else { 'other' }
"#;
    let args = [
        "-NoProfile".to_owned(),
        "-NonInteractive".to_owned(),
        "-EncodedCommand".to_owned(),
        crate::text::powershell_encoded(SCRIPT),
    ];
    let env = [
        ("AAI_PEER_PORT".to_owned(), remote.port().to_string()),
        ("AAI_OWN_PORT".to_owned(), local.port().to_string()),
    ];
    match ask("powershell.exe", &args, &env)
        .await
        .as_deref()
        .map(str::trim)
    {
        Some("owner") => Peer::Owner,
        // The uid is not a Windows notion; the refusal is logged with 0.
        Some("other") => Peer::Other(0),
        _ => Peer::Unknown,
    }
}

#[cfg(target_os = "linux")]
fn my_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The uid of the socket in `table` (the text of `/proc/net/tcp{,6}`) whose local address
/// is `local` and remote address `remote`.
pub(crate) fn owner_in(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid …
        let (l, r, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (same(parse_address(l)?, local) && same(parse_address(r)?, remote))
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// Equal addresses, an IPv4 address and its IPv4-mapped IPv6 form alike.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits (IPv6), each 32-bit word in the host's byte
/// order, then the port in hex.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::swap_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?.to_be_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(&ip[i * 8..i * 8 + 8])?.to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real lines (little-endian x86): a client 127.0.0.1:51234 (uid 65534) connected to
    // 127.0.0.1:8080, and the listener's own socket (uid 1000); and their IPv6 forms.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 101 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C822 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 102 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:C822 01 00000000:00000000 00:00000000 00000000  1000        0 103 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:C823 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000   501        0 104 1 0000000000000000 20 4 30 10 -1
   1: 0000000000000000FFFF00000100007F:C824 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000   502        0 105 1 0000000000000000 20 4 30 10 -1
";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_client_socket_and_its_owner_are_found() {
        let server = addr("127.0.0.1:8080");
        assert_eq!(owner_in(TCP, addr("127.0.0.1:51234"), server), Some(65534));
        assert_eq!(owner_in(TCP, server, addr("127.0.0.1:51234")), Some(1000));
        assert_eq!(owner_in(TCP, addr("127.0.0.1:51235"), server), None);
        assert_eq!(
            owner_in(TCP6, addr("[::1]:51235"), addr("[::1]:8080")),
            Some(501)
        );
        // An IPv4 client of a dual-stack listener appears in tcp6 in its mapped form.
        assert_eq!(owner_in(TCP6, addr("127.0.0.1:51236"), server), Some(502));
        assert_eq!(owner_in("garbage\n1: x y z", server, server), None);
    }

    #[test]
    fn lsof_names_the_client_sockets_owner() {
        let listing = "p100\nu501\nf7\nn127.0.0.1:3000->127.0.0.1:53211\np200\nu502\nf9\nn127.0.0.1:53211->127.0.0.1:3000\n";
        assert_eq!(client_uid(listing, addr("127.0.0.1:53211")), Some(502));
        assert_eq!(client_uid(listing, addr("127.0.0.1:53212")), None);
        let v6 = "p1\nu77\nn[::1]:6000->[::1]:3000\n";
        assert_eq!(client_uid(v6, addr("[::1]:6000")), Some(77));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_connection_of_this_process_is_the_owners() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(of(accepted.local_addr().unwrap(), peer), Peer::Owner);
        drop(client);
    }
}
