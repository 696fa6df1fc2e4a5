//! Token exchange (RFC 8693) for a remote MCP server that trusts the team's authorization
//! server: a person's own access token (issued to them for the gateway) exchanged there
//! for one for that server, so that they act upstream as themselves without signing in
//! to it. The gateway authenticates as its confidential client (`web.auth.clientId`).

use super::{AuthServer, Client, exchange};
use crate::auth::oauth::{self, Tokens};

/// The grant type.
pub(crate) const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The type of the token given and of the token asked for.
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Whether `server`'s metadata offers token exchange.
pub(crate) fn offered(server: &AuthServer) -> bool {
    server.grant_types.iter().any(|g| g == GRANT)
}

/// Exchanges `subject` (the person's access token) at `server`, as `client`, for an access
/// token for `resource` with `scopes` when the resource names any. No actor token is
/// sent. Whatever the server echoes of the subject token never reaches an error.
pub(crate) async fn token(
    server: &AuthServer,
    client: &Client,
    subject: &str,
    resource: &str,
    scopes: Option<&[String]>,
) -> Result<Tokens, oauth::Error> {
    let mut form = vec![
        ("grant_type", GRANT.to_owned()),
        ("subject_token", subject.to_owned()),
        ("subject_token_type", ACCESS_TOKEN.to_owned()),
        ("requested_token_type", ACCESS_TOKEN.to_owned()),
        ("resource", resource.to_owned()),
    ];
    if let Some(scopes) = scopes.filter(|s| !s.is_empty()) {
        form.push(("scope", scopes.join(" ")));
    }
    exchange(&server.token_endpoint, client, form, None).await
}
