//! The one shape of a refused input: the field that is wrong and the rule it broke.
//!
//! The API turns it into a 422 whose message names both, so a caller knows what to fix. A
//! well-formed value that refers to what the API holds in a way that cannot be (a Task not of the
//! Change, a catalogue case of a type a ladder cannot clear) is the same shape with
//! [`Refused::Conflict`]: a 409, since the OpenAPI document calls the request valid and only what
//! the API holds makes it impossible (decision 0012).

use std::fmt;

/// An input that breaks a rule. `field` is the JSON path of the offending value
/// (`combination.model`, `variants[2]`), `rule` says what a valid value looks like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    pub field: String,
    pub rule: String,
    pub refused: Refused,
}

/// What makes a value wrong: the request itself, or what the API holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Refused {
    /// The value breaks a rule of its own (422).
    #[default]
    Invalid,
    /// The value is well formed but names something that cannot be used this way (409).
    Conflict,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            rule: rule.into(),
            refused: Refused::Invalid,
        }
    }

    /// A well-formed value that what the API holds rules out.
    pub fn conflict(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            refused: Refused::Conflict,
            ..Self::new(field, rule)
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

/// A lowercase identifier: `[a-z0-9]` first, then `[a-z0-9._-]`, at most `max` characters.
pub fn check_slug(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    let ok_first = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ok_rest = value
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if value.is_empty() || !ok_first || !ok_rest || value.len() > max {
        return Err(ValidationError::new(
            field,
            format!("must be 1-{max} characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit"),
        ));
    }
    Ok(())
}

/// An identifier that may also carry upper case, `:` and `@` (model ids such as `claude-sonnet-4@20250514`).
/// No `/`: such ids appear as one path segment in URLs.
pub fn check_name(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@'));
    if !ok {
        return Err(ValidationError::new(
            field,
            format!(
                "must be 1-{max} characters of letters, digits, '.', '_', '-', ':' or '@', starting with a letter or digit"
            ),
        ));
    }
    Ok(())
}

/// A git object id (a commit or a tree): 40 lowercase hex digits.
pub fn check_object_id(field: &str, value: &str, what: &str) -> Result<(), ValidationError> {
    if value.len() != 40 || !value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(ValidationError::new(
            field,
            format!("must be a 40-digit lowercase hex {what} id"),
        ));
    }
    Ok(())
}

/// Free text that must not be blank.
pub fn check_text(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.trim().is_empty() || value.chars().count() > max {
        return Err(ValidationError::new(
            field,
            format!("must be non-blank text of at most {max} characters"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_rejects_upper_case_and_names_the_field() {
        let err = check_slug("slug", "Snake", 64).unwrap_err();
        assert_eq!(err.field, "slug");
        assert!(check_slug("slug", "snake-2d", 64).is_ok());
        assert!(check_slug("slug", "", 64).is_err());
        assert!(check_slug("slug", "-x", 64).is_err());
    }

    #[test]
    fn a_model_name_may_carry_colons_but_not_slashes() {
        assert!(check_name("model", "claude-sonnet:4.5", 128).is_ok());
        assert!(check_name("model", "anthropic/claude", 128).is_err());
        assert!(check_name("model", "bad name", 128).is_err());
    }
}
