//! Request extractors that answer bad input in the API's error shape: the bearer-token caller,
//! a JSON body whose errors name the offending field, and a query string likewise.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use belay_domain::api_token::{FailureAnswer, TokenState};
use belay_store::accounts::{Account, Authentication};
use belay_store::events::Actor;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The authenticated account behind `Authorization: Bearer <token>`. A token the database
/// knows but may not be used is answered 401 with the reason as its code (`token_revoked`,
/// `token_expired`, `account_disabled`); one it does not know, `unauthorized`. Every presented
/// token that fails counts against the client's address ([`crate::auth`]), which is slowed and
/// then refused (429) past the bound; a valid token is answered without delay whatever its
/// address did. Once authenticated, the account and the token's name are the request's actor
/// (`belay_store::events`).
pub struct Caller(pub Account);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <token> header"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .map(str::trim);
        let Some(token) = token else {
            return Err(failed(
                parts,
                state,
                "malformed",
                ApiError::unauthorized("Authorization must be `Bearer <token>`"),
            )
            .await);
        };
        let now = belay_store::now_ms();
        match state
            .store
            .authenticate_token(token, now, state.auth.track_last_used())
            .await?
        {
            Authentication::Valid {
                account, token_name, ..
            } => {
                if let Some(slot) = belay_store::events::current_actor_slot() {
                    slot.set(Actor {
                        account_id: account.id.to_string(),
                        account_name: account.name.clone(),
                        token_name,
                    });
                }
                Ok(Caller(account))
            }
            Authentication::Unknown => Err(failed(
                parts,
                state,
                "unknown",
                ApiError::unauthorized("the bearer token is not valid"),
            )
            .await),
            Authentication::Refused(why) => {
                let message = match why {
                    TokenState::Revoked => "the bearer token was revoked; make a new one (belay account token create)",
                    TokenState::Expired => "the bearer token has expired; make a new one (belay account token create)",
                    _ => "the token's account is disabled; an operator may enable it again",
                };
                Err(failed(
                    parts,
                    state,
                    why.code(),
                    ApiError::new(StatusCode::UNAUTHORIZED, why.code(), message),
                )
                .await)
            }
        }
    }
}

/// The answer to a presented token that failed: `refusal` after the bound's delay, or 429
/// `too_many_failures` with `Retry-After` once the address used up its failures.
async fn failed(parts: &Parts, state: &AppState, reason: &str, refusal: ApiError) -> ApiError {
    let address = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    match state.auth.fail(address, reason, belay_store::now_ms()) {
        FailureAnswer::Unauthorized { delay_ms } => {
            if delay_ms > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
            }
            refusal
        }
        FailureAnswer::TooMany { retry_after_s } => {
            tracing::warn!(client.address = %address, "failed authentications refused");
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_failures",
                format!("too many failed authentications from this address; retry after {retry_after_s} s"),
            );
            e.retry_after = Some(retry_after_s);
            e
        }
    }
}

/// A caller who is an operator: cabinet-wide actions (catalogue writes, bulk cancels) take this
/// instead of [`Caller`]. A member is answered 403 `operator_required` before its body is read,
/// and nothing changes (`belay_domain::access`).
pub struct Operator(pub Account);

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Caller(account) = Caller::from_request_parts(parts, state).await?;
        if !belay_domain::access::may(account.role, belay_domain::access::CabinetAction::CatalogueWrite) {
            return Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "operator_required",
                format!(
                    "this is a cabinet-wide action and account {} is a member; an operator takes it (belay account create --operator)",
                    account.name
                ),
            ));
        }
        Ok(Operator(account))
    }
}

fn strip_location(msg: String) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    }
}

/// Parses JSON text into `T`. Text that is not JSON is 400 `malformed_json`; JSON of the wrong
/// shape (a missing, unknown or mistyped field, a number where a word belongs) is 422
/// `invalid_field` naming the field. The text is read as a JSON value first, so every shape error
/// is a data error whatever the type, and a number with a zero fraction (`5.0`) counts as the
/// integer it is, as JSON Schema's `integer` says.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("body: not valid JSON: {}", strip_location(e.to_string())),
        )
    })?;
    integral_numbers_as_integers(&mut value);
    serde_path_to_error::deserialize::<_, T>(Strict(value.clone(), None)).map_err(|e| {
        let path = e.path().clone();
        let message = strip_location(e.into_inner().to_string());
        let (field, rule) = field_and_rule(&path, &message);
        let field = inner_field(&value, &path, &message).map_or(field, |inner| {
            if path.to_string() == "." {
                inner
            } else {
                format!("{path}.{inner}")
            }
        });
        let rule = match enum_words::<T>(&value, &path, &rule) {
            Some(words) => format!("{}expected {words}", rule.trim_end_matches("expected string or map")),
            None => rule,
        };
        ApiError::invalid(&field, rule)
    })
}

/// A JSON value read as a request body: an object where the type is a struct (serde would also
/// take an array, field by field), a word where a tag names a variant (serde would also take the
/// variant's index), otherwise as `serde_json::Value` reads itself. `key` is the field the value
/// sits in, so a tag's error can name it (serde reads an internally tagged enum's tag out of the
/// path's sight).
struct Strict(Value, Option<String>);

impl<'de> serde::Deserializer<'de> for Strict {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            // serde reads an internally tagged enum from an array too, its first item the tag.
            Value::Array(_) if format!("{}", &visitor as &dyn serde::de::Expected).starts_with("internally tagged") => {
                Err(serde::de::Error::invalid_type(
                    serde::de::Unexpected::Seq,
                    &"a JSON object",
                ))
            }
            Value::Array(items) => visitor.visit_seq(serde::de::value::SeqDeserializer::new(
                items.into_iter().map(|v| Strict(v, None)),
            )),
            Value::Object(map) => visitor.visit_map(serde::de::value::MapDeserializer::new(
                map.into_iter().map(|(k, v)| (k.clone(), Strict(v, Some(k)))),
            )),
            other => serde::Deserializer::deserialize_any(other, visitor),
        }
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(serde::de::Error::invalid_type(unexpected(&other), &"a JSON object")),
        }
    }

    fn deserialize_map<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(serde::de::Error::invalid_type(unexpected(&other), &"a JSON object")),
        }
    }

    fn deserialize_seq<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(_) => self.deserialize_any(visitor),
            other => Err(serde::de::Error::invalid_type(unexpected(&other), &"a JSON array")),
        }
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(Strict(other, self.1)),
        }
    }

    /// Only a tag names a variant here (an internally tagged enum's `kind`), and only by its word:
    /// serde would also take the variant's index.
    fn deserialize_identifier<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let tag = |e: serde_json::Error| match &self.1 {
            Some(key) => serde::de::Error::custom(format!("{TAG}{key}`: {e}")),
            None => e,
        };
        match &self.0 {
            Value::String(s) => visitor.visit_str(s).map_err(tag),
            other => Err(tag(serde::de::Error::invalid_type(unexpected(other), &"a string"))),
        }
    }

    fn deserialize_newtype_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct tuple tuple_struct ignored_any
    }
}

impl<'de> serde::de::IntoDeserializer<'de, serde_json::Error> for Strict {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

fn unexpected(v: &Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Unexpected::Signed(i),
            (_, Some(u), _) => Unexpected::Unsigned(u),
            (_, _, Some(f)) => Unexpected::Float(f),
            _ => Unexpected::Other("number"),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// How [`Strict`] marks the error of a tag, for [`field_and_rule`] to name the tag's field.
const TAG: &str = "tag `";

/// `5.0` as `5`: JSON does not tell the two apart, and neither does an `integer` schema.
fn integral_numbers_as_integers(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f >= -(2f64.powi(63))
                && f < 2f64.powi(63)
            {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers_as_integers),
        _ => {}
    }
}

/// The field a deserialization error is about, as a JSON path (`combination.model`,
/// `variants[2]`), and the rule it broke. A missing or unknown field is named itself, not its
/// parent object.
fn field_and_rule(path: &serde_path_to_error::Path, message: &str) -> (String, String) {
    let parent = path.to_string();
    let join = |name: &str| {
        if parent == "." {
            name.to_string()
        } else {
            format!("{parent}.{name}")
        }
    };
    // The path reaches into an unknown field or a tag itself when serde got that far.
    let named = |name: String| {
        if parent == name || parent.ends_with(&format!(".{name}")) {
            parent.clone()
        } else {
            join(&name)
        }
    };
    let quoted = |rest: &str| {
        rest.split_once('`')
            .map(|(name, tail)| (name.to_string(), tail.to_string()))
    };
    if let Some((name, _)) = message.strip_prefix("missing field `").and_then(quoted) {
        return (join(&name), "is required".to_string());
    }
    if let Some((name, rest)) = message.strip_prefix(TAG).and_then(quoted) {
        return (named(name), rest.trim_start_matches(": ").to_string());
    }
    if let Some((name, tail)) = message.strip_prefix("unknown field `").and_then(quoted) {
        let expected = tail.trim_start_matches(", ");
        return (named(name), format!("is not a field here ({expected})"));
    }
    let field = if parent == "." { "body".to_string() } else { parent };
    (field, message.to_string())
}

/// The field under `path` a wrong value sits in, when serde lost sight of it: a tagged or
/// flattened type reads its fields from a buffered copy, so its errors stop at the object
/// (`bufferTarget`, `combination`, the body). The value serde names as unexpected is looked up
/// in that object's subtree; when exactly one field holds it, that field is the one
/// (`runs`, `harness`, `argv`, `bindings.slot`).
fn inner_field(value: &Value, path: &serde_path_to_error::Path, message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    let (shown, _) = rest.split_once(", expected ")?;
    let mut at = value;
    for segment in path.iter() {
        at = match segment {
            serde_path_to_error::Segment::Map { key } => at.get(key.as_str())?,
            serde_path_to_error::Segment::Seq { index } => at.get(*index)?,
            _ => return None,
        };
    }
    if !at.is_object() || unexpected(at).to_string() == shown {
        return None;
    }
    fn walk(v: &Value, here: String, shown: &str, found: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let p = if here.is_empty() {
                        k.clone()
                    } else {
                        format!("{here}.{k}")
                    };
                    if unexpected(child).to_string() == shown {
                        found.push(p.clone());
                    }
                    walk(child, p, shown, found);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let p = format!("{here}[{i}]");
                    if unexpected(child).to_string() == shown {
                        found.push(p.clone());
                    }
                    walk(child, p, shown, found);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(at, String::new(), shown, &mut found);
    match found.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// For a value of the wrong type where an enum belongs (`{"scope":7}`), the enum's words: the
/// same body with a string no enum has in that place is deserialized again, and its error names
/// them.
fn enum_words<T: DeserializeOwned>(value: &Value, path: &serde_path_to_error::Path, rule: &str) -> Option<String> {
    if !rule.ends_with("expected string or map") {
        return None;
    }
    let mut probe = value.clone();
    let mut at = &mut probe;
    for segment in path.iter() {
        at = match segment {
            serde_path_to_error::Segment::Map { key } => at.get_mut(key.as_str())?,
            serde_path_to_error::Segment::Seq { index } => at.get_mut(*index)?,
            _ => return None,
        };
    }
    *at = Value::String("\u{0}".to_string());
    let message = serde_json::from_value::<T>(probe).err()?.to_string();
    let (_, words) = message.split_once("`, expected ")?;
    Some(strip_location(words.to_string()))
}

/// How much of a body past [`crate::BODY_LIMIT`] is read and discarded before the 413 goes out,
/// so that a client still sending sees the answer rather than a connection closed under it.
const DRAIN_PAST_LIMIT: usize = 16 * 1024 * 1024;

/// A request body of at most [`crate::BODY_LIMIT`] bytes; past it, 413 `body_too_large` naming
/// the limit, once the rest was read (up to [`DRAIN_PAST_LIMIT`]).
async fn read_body(req: Request) -> Result<Bytes, ApiError> {
    use futures::StreamExt;
    let mut stream = req.into_body().into_data_stream();
    let mut kept = Vec::new();
    let mut past = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_body", format!("body: {e}")))?;
        if past == 0 && kept.len() + chunk.len() <= crate::BODY_LIMIT {
            kept.extend_from_slice(&chunk);
            continue;
        }
        past += chunk.len();
        if past > DRAIN_PAST_LIMIT {
            break;
        }
    }
    if past > 0 {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("body: larger than the limit of {} bytes", crate::BODY_LIMIT),
        ));
    }
    Ok(Bytes::from(kept))
}

/// A JSON request body.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let _ = state;
        let bytes = read_body(req).await?;
        if bytes.is_empty() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                "body: a JSON body is required",
            ));
        }
        parse_json(&bytes).map(ApiJson)
    }
}

/// A query string. Query structs keep their values as text and parse them in the handler with
/// [`int_param`], so a bad value is reported with its parameter's name.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        serde_urlencoded::from_str(parts.uri.query().unwrap_or_default())
            .map(ApiQuery)
            .map_err(|e| ApiError::invalid("query", e))
    }
}

/// Parses an integer query parameter within `min..=max`.
pub fn int_param(name: &str, value: Option<&str>, default: i64, min: i64, max: i64) -> Result<i64, ApiError> {
    let Some(v) = value else { return Ok(default) };
    match v.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::invalid(
            name,
            format!("must be an integer from {min} to {max}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use belay_domain::catalogue::HarnessInput;
    use belay_domain::job::LaunchInput;
    use belay_domain::review::ReviewInput;
    use belay_domain::workspace::ToolCall;

    /// The status, code and message of a refused body.
    fn refused<T: DeserializeOwned>(body: &str) -> (u16, String, String) {
        let e = parse_json::<T>(body.as_bytes()).err().expect("refused");
        (e.status.as_u16(), e.code, e.message)
    }

    fn field_of<T: DeserializeOwned>(body: &str) -> String {
        let (status, code, message) = refused::<T>(body);
        assert_eq!((status, code.as_str()), (422, "invalid_field"), "{message}");
        message.split_once(": ").expect("field: rule").0.to_string()
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Scoped {
        scope: belay_domain::review::Rating,
    }

    #[test]
    fn a_number_where_a_word_belongs_is_an_invalid_field_naming_it_and_its_words() {
        let (status, _, message) = refused::<Scoped>(r#"{"scope":7}"#);
        assert_eq!(status, 422);
        assert!(message.starts_with("scope: invalid type: integer `7`"), "{message}");
        assert!(
            message.contains("`broken`") && message.contains("`flawless`"),
            "{message}"
        );
        assert_eq!(
            field_of::<ReviewInput>(r#"{"ratings":{"gameplay":3}}"#),
            "ratings.gameplay"
        );
        assert_eq!(field_of::<ReviewInput>(r#"{"category":3}"#), "category");
    }

    #[test]
    fn a_tag_is_named_whether_it_is_a_number_an_unknown_word_or_missing() {
        let launch = |combination: &str| {
            format!(r#"{{"case":{{"slug":"c","version":"1.0.0","variant":"v"}},"combination":{combination}}}"#)
        };
        for combination in [
            r#"{"kind":7,"harness":"h","model":"m"}"#,
            r#"{"kind":"robot","harness":"h","model":"m"}"#,
            r#"{"harness":"h","model":"m"}"#,
        ] {
            assert_eq!(
                field_of::<LaunchInput>(&launch(combination)),
                "combination.kind",
                "{combination}"
            );
        }
        let harness = r#"{"name":"h","maxParallelism":1,"adapter":{"kind":0,"argv":["x"]}}"#;
        assert_eq!(field_of::<HarnessInput>(harness), "adapter.kind");
    }

    #[test]
    fn a_refused_body_names_the_field_where_the_rule_broke_at_any_depth() {
        let plan = r#"{"name":"p","runsPerCell":1,"bufferTarget":{"kind":"bounded","runs":"ten"}}"#;
        assert_eq!(
            field_of::<belay_domain::coverage::CoveragePlanInput>(plan),
            "bufferTarget.runs"
        );
        let launch = r#"{"case":{"slug":"c","version":"1.0.0","variant":"v"},"combination":{"kind":"harness","harness":7,"model":"m"}}"#;
        assert_eq!(field_of::<LaunchInput>(launch), "combination.harness");
        let gg = r#"{"case":{"slug":"c","version":"1.0.0","variant":"v"},"combination":{"kind":"gg","ggConfigId":"g","bindings":{"slot":5}}}"#;
        assert_eq!(field_of::<LaunchInput>(gg), "combination.bindings.slot");
        assert_eq!(
            field_of::<ToolCall>(r#"{"tool":"run_command","argv":"bun test"}"#),
            "argv"
        );
        assert_eq!(
            field_of::<ToolCall>(r#"{"tool":"run_command","argv":["bun", 3]}"#),
            "argv[1]"
        );
    }

    #[test]
    fn a_tool_call_names_its_missing_or_unknown_field() {
        assert_eq!(field_of::<ToolCall>(r#"{"tool":"read_file"}"#), "path");
        assert_eq!(
            field_of::<ToolCall>(r#"{"tool":"read_file","path":"a","mode":"r"}"#),
            "mode"
        );
        assert_eq!(field_of::<ToolCall>(r#"{"path":"a"}"#), "tool");
        let patch = r#"{"maxParallelism":2,"colour":"red"}"#;
        assert_eq!(field_of::<belay_domain::catalogue::HarnessUpdate>(patch), "colour");
        let nested = r#"{"name":"h","maxParallelism":1,"adapter":{"kind":"script","script":"true","colour":1}}"#;
        assert_eq!(field_of::<HarnessInput>(nested), "adapter.colour");
    }

    #[test]
    fn an_array_is_not_an_object_and_text_that_is_not_json_is_malformed() {
        assert_eq!(field_of::<HarnessInput>("[null, null]"), "body");
        assert_eq!(
            field_of::<HarnessInput>(r#"{"name":"h","maxParallelism":1,"adapter":["script","true"]}"#),
            "adapter"
        );
        let (status, code, _) = refused::<HarnessInput>(r#"{"name":"#);
        assert_eq!((status, code.as_str()), (400, "malformed_json"));
    }

    #[test]
    fn an_integer_may_be_written_with_a_zero_fraction() {
        let h: HarnessInput =
            parse_json(br#"{"name":"h","maxParallelism":2.0,"adapter":{"kind":"script","script":"true"}}"#).unwrap();
        assert_eq!(h.max_parallelism, 2);
        assert_eq!(
            field_of::<HarnessInput>(
                r#"{"name":"h","maxParallelism":2.5,"adapter":{"kind":"script","script":"true"}}"#
            ),
            "maxParallelism"
        );
    }
}
