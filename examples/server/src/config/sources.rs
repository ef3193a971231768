//! Where each setting's text comes from: its command-line flag, else its environment
//! variable, else its key in the TOML file, else its declared default ([`super::settings`]).
//! Empty texts count as unset at every level.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ConfigError;
use super::settings::declared;

/// Where a setting's text came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// This command-line flag.
    CommandLine(String),
    /// The process environment.
    Env,
    /// The TOML file at this path.
    File(PathBuf),
    /// The setting's declared default.
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::CommandLine(flag) => write!(f, "command line {flag}"),
            Self::Env => f.write_str("environment"),
            Self::File(path) => write!(f, "config file {}", path.display()),
            Self::Default => f.write_str("default"),
        }
    }
}

/// The variable naming the config file, for its own errors.
pub(super) const CONFIG_VAR: &str = "TIDINGS_CONFIG";

/// Raw setting texts by variable, each with its origin.
#[derive(Debug, Default)]
pub struct Sources {
    values: BTreeMap<String, (String, Origin)>,
}

impl Sources {
    /// Reads the TOML file (if any), `env` (a lookup such as `std::env::var`) and `flag` (the
    /// command-line value of a setting, by its clap id).
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        flag: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let settings = declared();
        let mut from_file = match file {
            Some(path) => read_file(path, &settings)?,
            None => BTreeMap::new(),
        };
        let text = |text: Option<String>| text.filter(|t| !t.trim().is_empty());
        let mut values = BTreeMap::new();
        for setting in settings {
            let found = text(flag(&setting.id))
                .map(|t| (t, Origin::CommandLine(setting.flag.clone())))
                .or_else(|| text(env(&setting.var)).map(|t| (t, Origin::Env)))
                .or_else(|| from_file.remove(&setting.var).filter(|(t, _)| !t.trim().is_empty()))
                .or_else(|| setting.default.clone().map(|t| (t, Origin::Default)));
            if let Some(found) = found {
                values.insert(setting.var, found);
            }
        }
        Ok(Self { values })
    }

    fn get(&self, key: &str) -> Option<(&str, &Origin)> {
        self.values.get(key).map(|(v, o)| (v.trim(), o))
    }

    /// Parses `key` with `parse` (whose error message is the reason); `None` if unset and
    /// without a default.
    pub(super) fn parse<T>(
        &self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some((text, origin)) => parse(text).map(Some).map_err(|m| ConfigError::new(key, Some(origin.clone()), m)),
        }
    }

    /// Parses `key`, which has a default.
    pub(super) fn value<T>(&self, key: &str, parse: impl FnOnce(&str) -> Result<T, String>) -> Result<T, ConfigError> {
        self.parse(key, parse)?.ok_or_else(|| ConfigError::new(key, None, "has no default; declare one"))
    }

    /// Parses `key` only when it was set (by flag, environment or file), not defaulted.
    pub(super) fn parse_set<T>(
        &self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        if self.origin(key).is_none_or(|o| o == Origin::Default) { Ok(None) } else { self.parse(key, parse) }
    }

    /// Where `key`'s text came from, if it has one.
    pub(super) fn origin(&self, key: &str) -> Option<Origin> {
        self.get(key).map(|(_, o)| o.clone())
    }
}

/// The file's settings by variable. Keys are the variables lower-case without `TIDINGS_`;
/// an array of strings (`retry_schedule = ["1s", "2s"]`) reads as the comma-separated list.
fn read_file(
    path: &Path,
    settings: &[super::settings::Declared],
) -> Result<BTreeMap<String, (String, Origin)>, ConfigError> {
    let origin = Origin::File(path.to_owned());
    let fail = |message: String| ConfigError::new(CONFIG_VAR, Some(origin.clone()), message);
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read the file: {e}")))?;
    let table: toml::Table = text.parse().map_err(|e| fail(format!("not valid TOML: {e}")))?;
    let mut values = BTreeMap::new();
    for (name, value) in table {
        let var = settings
            .iter()
            .map(|s| &s.var)
            .find(|var| var["TIDINGS_".len()..].eq_ignore_ascii_case(&name))
            .ok_or_else(|| fail(format!("unknown key `{name}`")))?;
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => {
                let parts: Option<Vec<String>> = items.into_iter().map(|v| v.as_str().map(str::to_owned)).collect();
                parts.ok_or_else(|| fail(format!("`{name}` must be an array of strings")))?.join(",")
            }
            _ => return Err(fail(format!("`{name}` must be a string, number or boolean"))),
        };
        values.insert(var.clone(), (text, origin.clone()));
    }
    Ok(values)
}
