//! Who is calling: the client a call comes from ([`Caller`]: its name, transport and
//! token) and, behind the team's sign-in, the person ([`Person`]); and whose sign-in a
//! call uses upstream ([`Who`]). A leaf: consent, access checks, rate limits and
//! credentials all key on it.

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The client's `clientInfo.name`.
    pub name: String,
    /// The transport: `stdio`, `http`, `cli`.
    pub transport: &'static str,
    /// Over HTTP with a bearer token: which token (the first 8 hex digits of its SHA-256),
    /// so that grants made under one token do not serve another.
    pub token: Option<String>,
    /// Over HTTP with the team's access token (`web.auth`): the person it was issued to.
    pub person: Option<std::sync::Arc<Person>>,
}

/// A person signed in through the team's authorization server: the subject of a
/// validated access token and what it carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Person {
    /// The token's `sub`, as the issuer wrote it (at most [`Person::MAX_SUBJECT`]
    /// characters, no control characters).
    pub subject: String,
    /// Its scopes, sorted.
    pub scopes: Vec<String>,
    /// Whether it carries the admin scope (`web.auth.adminScope`): it sees everyone's
    /// history and pending calls.
    pub admin: bool,
    /// The token itself, for a token exchange on the person's behalf (RFC 8693).
    pub bearer: Bearer,
}

/// A person's access token and when it expires (Unix seconds; 0: unknown). Not part of
/// who the person is: every two compare equal and hash alike, and `Debug` never shows
/// the token.
#[derive(Clone, Default)]
pub struct Bearer {
    /// The token.
    pub token: std::sync::Arc<str>,
    /// Its `exp`.
    pub expires_at: u64,
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(…)")
    }
}

impl PartialEq for Bearer {
    fn eq(&self, _: &Bearer) -> bool {
        true
    }
}

impl Eq for Bearer {}

impl std::hash::Hash for Bearer {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl Person {
    /// Longest subject accepted.
    pub const MAX_SUBJECT: usize = 200;

    /// Whether `subject` can name a person: not empty, not too long, printable.
    pub fn valid_subject(subject: &str) -> bool {
        !subject.is_empty()
            && subject.chars().count() <= Person::MAX_SUBJECT
            && !subject.chars().any(char::is_control)
    }
}

/// Whose sign-in a call uses upstream (an app's OAuth tokens, a remote MCP server's
/// sign-in), decided by `Pipeline::who`: in team mode each person's own, unless the app is
/// set to share one (`apps.<id>.signIn: "shared"`); else the one the user made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Who {
    /// The app's one sign-in: single-user mode, the command line, static credentials, and
    /// apps whose sign-in is shared.
    #[default]
    Shared,
    /// The person of this subject's own sign-in.
    Person(std::sync::Arc<str>),
}

impl Who {
    /// The person's subject, if any.
    pub fn person(&self) -> Option<&str> {
        match self {
            Who::Shared => None,
            Who::Person(subject) => Some(subject),
        }
    }
}

impl Caller {
    /// The user at the command line: they asked for the call themselves.
    pub fn cli() -> Caller {
        Caller {
            name: "aai-gateway".into(),
            transport: "cli",
            token: None,
            person: None,
        }
    }

    /// The web UI's own "try it" form: the user at the UI, like the command line.
    pub fn ui() -> Caller {
        Caller {
            name: "web-ui".into(),
            transport: "ui",
            token: None,
            person: None,
        }
    }

    /// Whether the user is the caller (the command line, the web UI's "try it" form):
    /// they asked for the call itself, so it does not ask them again.
    pub fn is_user(&self) -> bool {
        matches!(self.transport, "cli" | "ui")
    }

    /// `name@transport` (`name@http#1a2b3c4d` with a bearer token, `name@http~alice` for
    /// a person signed in with the team's token), the key of grants and history. A
    /// person's client name and subject have `%`, `@`, `~` and `#` percent-encoded, so
    /// that no client name can make one person's key end like another's.
    pub fn key(&self) -> String {
        match (&self.person, &self.token) {
            (Some(person), _) => format!(
                "{}@{}~{}",
                key_part(&self.name),
                self.transport,
                key_part(&person.subject)
            ),
            (None, Some(id)) => format!("{}@{}#{id}", self.name, self.transport),
            (None, None) => format!("{}@{}", self.name, self.transport),
        }
    }

    /// Whether a caller key (of a grant, a pending call or a history record) is one of
    /// `subject`'s, as [`Caller::key`] writes them: `<client>@http~<subject>`.
    pub fn key_is_persons(key: &str, subject: &str) -> bool {
        key.strip_suffix(key_part(subject).as_ref())
            .and_then(|rest| rest.strip_suffix("@http~"))
            .is_some_and(|name| !name.is_empty() && !name.contains(['@', '~', '#']))
    }

    /// Who is behind the call, whatever client they use: the person's subject, else the
    /// caller's key (one user). Rate limits and the UI's "mine" go by it.
    pub fn person_key(&self) -> String {
        match &self.person {
            Some(person) => format!("~{}", person.subject),
            None => self.key(),
        }
    }
}

/// A client name or subject inside a person's caller key: the key's separators and `%`
/// percent-encoded.
// Hand-written: `percent_encoding` always encodes non-ASCII bytes, which keys keep as is.
fn key_part(part: &str) -> std::borrow::Cow<'_, str> {
    if !part.contains(['%', '@', '~', '#']) {
        return std::borrow::Cow::Borrowed(part);
    }
    let mut out = String::with_capacity(part.len() + 6);
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            '@' => out.push_str("%40"),
            '~' => out.push_str("%7E"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}
