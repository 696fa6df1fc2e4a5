//! Localized application names.
//!
//! Two forms exist (docs/descriptors.md, Rules common to all forms):
//! * a pipe-separated string (`"Reminders|提醒事项|Rappels"`, as the platforms and
//!   snake_case forms write it): no language tags, so the first part is the primary
//!   name and every part is used for matching and shown in descriptions;
//! * a BCP-47 object with `defaultLang` (the camelCase form): resolved by locale — exact
//!   tag, then the same language (preferring the same script, so `zh-HK` finds `zh-TW`
//!   before `zh-CN`), then `defaultLang`, then the first entry;
//! * the access form's object with a `default` entry (`{"default": "Claude Code",
//!   "zh-CN": …}`): the other entries are BCP-47 tags, and `default` is the name for every
//!   locale none of them fits — kept as a [`AppName::Tagged`] entry under the tag
//!   [`DEFAULT_TAG`], which is also its `default_lang`.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// An app's name(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppName {
    /// Untagged names; the first is primary.
    Parts(Vec<String>),
    /// Names by BCP-47 tag, in document order.
    Tagged {
        /// `(tag, name)` pairs.
        names: Vec<(String, String)>,
        /// The tag to fall back to; always present in `names`.
        default_lang: String,
    },
}

/// The tag of an access-form name's `default` entry: not a language, so no locale picks
/// it but as the fallback.
pub const DEFAULT_TAG: &str = "default";

impl AppName {
    /// An access-form name: `default` for every locale the `localized` names (by BCP-47
    /// tag, in document order) do not fit.
    pub fn with_default(default: String, localized: Vec<(String, String)>) -> AppName {
        let mut names = vec![(DEFAULT_TAG.to_owned(), default)];
        names.extend(localized.into_iter().filter(|(tag, _)| tag != DEFAULT_TAG));
        AppName::Tagged {
            names,
            default_lang: DEFAULT_TAG.to_owned(),
        }
    }

    /// Splits a pipe-separated name; empty parts are dropped.
    pub fn from_pipe(text: &str) -> AppName {
        AppName::Parts(
            text.split('|')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// The name in the default language (first part of a pipe name).
    pub fn primary(&self) -> &str {
        match self {
            AppName::Parts(parts) => parts.first().map(String::as_str).unwrap_or_default(),
            AppName::Tagged {
                names,
                default_lang,
            } => names
                .iter()
                .find(|(tag, _)| tag == default_lang)
                .or(names.first())
                .map(|(_, n)| n.as_str())
                .unwrap_or_default(),
        }
    }

    /// The name for `locale` (a BCP-47 tag such as `zh-TW`, any case, `_` allowed).
    pub fn resolve(&self, locale: Option<&str>) -> &str {
        let (AppName::Tagged { names, .. }, Some(locale)) = (self, locale) else {
            return self.primary();
        };
        let wanted = Tag::parse(locale);
        if let Some((_, n)) = names.iter().find(|(t, _)| Tag::parse(t) == wanted) {
            return n;
        }
        let same_language = || {
            names
                .iter()
                .filter(|(t, _)| Tag::parse(t).language == wanted.language)
        };
        same_language()
            .find(|(t, _)| Tag::parse(t).script() == wanted.script())
            .or_else(|| same_language().next())
            .map(|(_, n)| n.as_str())
            .unwrap_or_else(|| self.primary())
    }

    /// Every distinct name, primary first, for matching and descriptions.
    pub fn all(&self) -> Vec<&str> {
        let mut out: Vec<&str> = vec![self.primary()];
        let rest: Box<dyn Iterator<Item = &str>> = match self {
            AppName::Parts(parts) => Box::new(parts.iter().map(String::as_str)),
            AppName::Tagged { names, .. } => Box::new(names.iter().map(|(_, n)| n.as_str())),
        };
        for name in rest {
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }
}

impl Serialize for AppName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AppName::Parts(parts) => parts.serialize(s),
            AppName::Tagged {
                names,
                default_lang,
            } => {
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("defaultLang", default_lang)?;
                map.serialize_entry("names", &Names(names))?;
                map.end()
            }
        }
    }
}

struct Names<'a>(&'a [(String, String)]);

impl Serialize for Names<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (tag, name) in self.0 {
            map.serialize_entry(tag, name)?;
        }
        map.end()
    }
}

/// A language tag reduced to what fallback needs.
#[derive(Debug, PartialEq, Eq)]
struct Tag {
    language: String,
    script: Option<String>,
    region: Option<String>,
}

impl Tag {
    fn parse(tag: &str) -> Tag {
        let mut parts = tag.split(['-', '_']).map(str::to_ascii_lowercase);
        let language = parts.next().unwrap_or_default();
        let (mut script, mut region) = (None, None);
        for part in parts {
            match part.len() {
                4 if script.is_none() => script = Some(part),
                2 | 3 if region.is_none() => region = Some(part),
                _ => {}
            }
        }
        Tag {
            language,
            script,
            region,
        }
    }

    /// The script, explicit or implied by the region (only Chinese needs this here).
    fn script(&self) -> Option<&str> {
        if let Some(s) = &self.script {
            return Some(s);
        }
        match (self.language.as_str(), self.region.as_deref()) {
            ("zh", Some("tw" | "hk" | "mo")) => Some("hant"),
            ("zh", _) => Some("hans"),
            _ => None,
        }
    }
}

/// Turns a POSIX locale (`zh_CN.UTF-8`, `de_DE@euro`) into a BCP-47 tag (`zh-CN`).
/// `C`, `POSIX` and empty values mean "no preference" and give `None`.
pub fn locale_from_posix(value: &str) -> Option<String> {
    let base = value.split(['.', '@']).next().unwrap_or_default().trim();
    if base.is_empty() || base == "C" || base == "POSIX" {
        return None;
    }
    Some(base.replace('_', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reminders() -> AppName {
        AppName::Tagged {
            names: [
                ("en", "Reminders"),
                ("zh-CN", "提醒事项"),
                ("zh-TW", "提醒事項"),
                ("de", "Erinnerungen"),
                ("fr", "Rappels"),
            ]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect(),
            default_lang: "en".to_owned(),
        }
    }

    #[test]
    fn tagged_names_fall_back_by_tag_then_language_then_default() {
        let n = reminders();
        let r = |l| n.resolve(locale_from_posix(l).as_deref()).to_owned();
        assert_eq!(r("zh_CN.UTF-8"), "提醒事项");
        assert_eq!(r("zh_TW.UTF-8"), "提醒事項");
        assert_eq!(r("zh_HK.UTF-8"), "提醒事項", "same script first");
        assert_eq!(r("zh_SG"), "提醒事项");
        assert_eq!(r("zh"), "提醒事项");
        assert_eq!(r("de_DE.UTF-8"), "Erinnerungen");
        assert_eq!(r("de_AT@euro"), "Erinnerungen");
        assert_eq!(r("fr_CA.UTF-8"), "Rappels");
        assert_eq!(r("ja_JP.UTF-8"), "Reminders");
        assert_eq!(r("C.UTF-8"), "Reminders");
        assert_eq!(n.resolve(Some("ZH-tw")), "提醒事項");
    }

    #[test]
    fn taiwan_falls_back_to_mainland_when_it_is_the_only_chinese() {
        let n = AppName::Tagged {
            names: vec![
                ("en".into(), "Yuque".into()),
                ("zh-CN".into(), "语雀".into()),
            ],
            default_lang: "en".into(),
        };
        assert_eq!(n.resolve(Some("zh-TW")), "语雀");
    }

    #[test]
    fn a_default_name_is_the_fallback_of_every_locale_the_others_miss() {
        let n = AppName::with_default(
            "Claude Code".into(),
            vec![
                ("en".into(), "Claude Code".into()),
                ("zh-CN".into(), "克劳德".into()),
            ],
        );
        assert_eq!(n.primary(), "Claude Code");
        assert_eq!(n.resolve(Some("zh-TW")), "克劳德");
        assert_eq!(n.resolve(Some("ja-JP")), "Claude Code");
        assert_eq!(n.resolve(None), "Claude Code");
        assert_eq!(n.all(), ["Claude Code", "克劳德"]);
        assert_eq!(
            serde_json::to_value(&n).unwrap(),
            serde_json::json!({"defaultLang": "default",
                "names": {"default": "Claude Code", "en": "Claude Code", "zh-CN": "克劳德"}})
        );
    }

    #[test]
    fn pipe_names_have_no_tags_and_keep_every_part() {
        let n = AppName::from_pipe("Reminders|提醒事项| Rappels |");
        assert_eq!(n.primary(), "Reminders");
        assert_eq!(n.resolve(Some("zh-CN")), "Reminders");
        assert_eq!(n.all(), ["Reminders", "提醒事项", "Rappels"]);
    }
}
