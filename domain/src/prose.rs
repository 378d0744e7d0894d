//! Reading the prose people and agents write: goals, criteria, invariants, titles.
//!
//! Several rules look for words in free text (a sentence that says p95, an invariant that says
//! "unchanged", a Task title that says UI). They must split text the same way, so the splitting
//! lives here once.

/// The sentences of `text`: split after `.`, `!` or `?` followed by white space (or the end), and
/// at line breaks. Blank pieces are dropped; each is trimmed.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            let ends = matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
            if ends {
                out.push(&line[start..=i]);
                start = i + 1;
            }
        }
        out.push(&line[start..]);
    }
    out.into_iter()
        .map(str::trim)
        .filter(|s| s.chars().any(char::is_alphanumeric))
        .collect()
}

/// The lowercase words of `text`: runs of letters and digits.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `text` holds `phrase` (lower case, words separated by single spaces) as whole words.
pub fn has_phrase(text: &str, phrase: &str) -> bool {
    let hay = format!(" {} ", words(text).join(" "));
    hay.contains(&format!(" {phrase} "))
}

/// A lowercase slug of at most `max_words` words and `max_len` bytes: `Email delivery must
/// remain unchanged` → `email-delivery-must-remain-unchanged`.
pub fn slug(text: &str, max_words: usize, max_len: usize) -> String {
    let mut out = String::new();
    for w in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(max_words)
    {
        let w = w.to_ascii_lowercase();
        let extra = usize::from(!out.is_empty()) + w.len();
        if out.len() + extra > max_len {
            if out.is_empty() {
                out.push_str(&w[..max_len.min(w.len())]);
            }
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&w);
    }
    if out.is_empty() { "invariant".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sentences_end_at_stops_and_line_breaks_but_not_inside_numbers() {
        assert_eq!(
            sentences("Add a calendar. Keep p95 below 1.5ms!\nGET /api/health must remain 200"),
            [
                "Add a calendar.",
                "Keep p95 below 1.5ms!",
                "GET /api/health must remain 200"
            ]
        );
        assert!(sentences("  \n . ").is_empty());
    }

    #[test]
    fn a_phrase_matches_whole_words_only() {
        assert!(has_phrase("The list MUST remain sorted", "must remain"));
        assert!(!has_phrase("mustard remains", "must remain"));
    }

    #[test]
    fn a_slug_keeps_the_first_words() {
        assert_eq!(
            slug("Email delivery must remain unchanged.", 6, 48),
            "email-delivery-must-remain-unchanged"
        );
        assert_eq!(
            slug("Uptime stays at 99.9% for the whole month", 4, 48),
            "uptime-stays-at-99"
        );
        assert_eq!(slug("!!!", 4, 48), "invariant");
        assert_eq!(slug(&"a".repeat(80), 4, 10), "aaaaaaaaaa");
    }

    proptest! {
        #[test]
        fn a_slug_is_always_a_valid_check_id_part(text in any::<String>()) {
            let s = slug(&text, 6, 48);
            prop_assert!(!s.is_empty() && s.len() <= 48);
            prop_assert!(s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
            prop_assert!(!s.starts_with('-') && !s.ends_with('-') && !s.contains("--"));
        }

        #[test]
        fn splitting_any_text_never_panics(text in any::<String>()) {
            let _ = sentences(&text);
            let _ = words(&text);
        }
    }
}
