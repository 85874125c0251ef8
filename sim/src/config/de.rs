//! Deserialisation helpers that keep the full key path in every error message.
//!
//! serde's internally tagged enums buffer their input and lose the key path of errors inside a
//! variant (`workload.arrival: invalid type` instead of `workload.arrival.rate: invalid type`).
//! [`tagged_enum!`] deserialises a `kind = "..."` table by hand instead: it reads the table, takes
//! `kind`, and deserialises the rest into the variant's struct while tracking the path. The inner
//! path travels to the top inside the error message, behind [`PATH_MARK`], and
//! [`super::ConfigError`] joins it to the outer path.

use serde::de::{DeserializeOwned, Error};

/// Separates a relative key path from the message inside a custom error.
pub(crate) const PATH_MARK: char = '\u{1}';

/// Splits a message produced by [`variant`] into its relative path and the message proper.
pub(crate) fn split_marked(msg: &str) -> Option<(&str, &str)> {
    let rest = msg.strip_prefix(PATH_MARK)?;
    let (path, message) = rest.split_once(PATH_MARK)?;
    Some((path, message))
}

/// Joins two key paths: `a` + `b` → `a.b`, `a` + `[0].b` → `a[0].b`.
pub(crate) fn join_path(outer: &str, inner: &str) -> String {
    match (outer.is_empty() || outer == ".", inner.is_empty()) {
        (true, _) => inner.to_string(),
        (_, true) => outer.to_string(),
        _ if inner.starts_with('[') => format!("{outer}{inner}"),
        _ => format!("{outer}.{inner}"),
    }
}

/// The first line of a toml error message, without the `in \`key\`` suffix toml's value
/// deserialiser appends.
fn first_line(msg: &str) -> &str {
    msg.lines().next().unwrap_or("").trim_end()
}

/// Removes the `kind` key of a tagged table and returns its value.
pub(crate) fn take_kind<E: Error>(table: &mut toml::Table, kinds: &[&str]) -> Result<String, E> {
    let expected = kinds.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ");
    match table.remove("kind") {
        None => Err(E::custom(format!("{PATH_MARK}kind{PATH_MARK}missing; expected one of {expected}"))),
        Some(toml::Value::String(s)) if kinds.contains(&s.as_str()) => Ok(s),
        Some(toml::Value::String(s)) => {
            Err(E::custom(format!("{PATH_MARK}kind{PATH_MARK}unknown kind \"{s}\"; expected one of {expected}")))
        }
        Some(v) => Err(E::custom(format!("{PATH_MARK}kind{PATH_MARK}expected a string, got {v}"))),
    }
}

/// Deserialises the rest of a tagged table into the variant's struct, carrying the key path of
/// any error out in the message.
pub(crate) fn variant<T: DeserializeOwned, E: Error>(table: toml::Table) -> Result<T, E> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.into_inner().to_string();
        let msg = first_line(&msg);
        match split_marked(msg) {
            Some((inner, m)) => E::custom(format!("{PATH_MARK}{}{PATH_MARK}{m}", join_path(&path, inner))),
            None if path == "." => E::custom(msg),
            None => E::custom(format!("{PATH_MARK}{path}{PATH_MARK}{msg}")),
        }
    })
}

/// Implements `Deserialize` for an enum whose variants each wrap one struct, chosen by a
/// `kind = "..."` key. `Serialize` is derived as usual with `#[serde(tag = "kind")]`.
#[macro_export]
macro_rules! tagged_enum {
    ($ty:ident { $($kind:literal => $variant:ident($inner:ty)),* $(,)? }) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let mut table = <toml::Table as serde::Deserialize>::deserialize(d)?;
                let kind = $crate::config::de::take_kind::<D::Error>(&mut table, &[$($kind),*])?;
                match kind.as_str() {
                    $($kind => $crate::config::de::variant::<$inner, D::Error>(table).map($ty::$variant),)*
                    _ => unreachable!("take_kind accepts only listed kinds"),
                }
            }
        }
        impl $ty {
            /// The `kind` names this enum accepts (the tests draw from it; not every family
            /// reads its own list).
            #[allow(dead_code, unreachable_pub)]
            pub const KINDS: &'static [&'static str] = &[$($kind),*];
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join() {
        assert_eq!(join_path("a", "b"), "a.b");
        assert_eq!(join_path("a", "[0].b"), "a[0].b");
        assert_eq!(join_path(".", "b"), "b");
        assert_eq!(join_path("a", ""), "a");
        let m = format!("{PATH_MARK}x.y{PATH_MARK}bad");
        assert_eq!(split_marked(&m), Some(("x.y", "bad")));
        assert_eq!(split_marked("plain"), None);
    }
}
