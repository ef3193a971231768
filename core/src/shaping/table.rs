//! `ShapingTable`: the limits and adaptive rules of every site, the built-in ones with the
//! operator's file over them, and the rollup that finds a recipient domain's site from its
//! MX hosts.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};

use super::limits::{LimitsPatch, SiteLimits, TlsRequirement};
use super::rate::MessageRate;
use super::rules::{self, AdaptiveRule, Reaction};
use crate::domain_name::DomainName;

/// The name of a site: an MX host suffix of the table (`.google.com`), else the sorted MX
/// host names joined by commas (`mx1.example.net,mx2.example.net`), else, for a domain
/// without MX records, the domain itself. Only suffixes start with a dot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SiteKey(String);

/// Most MX host names a site key made of host names joins: keys stay short enough to store
/// and show however many MX records a domain publishes (domains sharing their first eight
/// hosts, in order of name, share a site).
const MAX_HOSTS_IN_KEY: usize = 8;

/// Longest site key: eight host names of at most 253 characters and their commas.
pub const MAX_SITE_KEY_LEN: usize = MAX_HOSTS_IN_KEY * 254;

impl SiteKey {
    /// A site key read back (from a store, or an operator's request): `None` unless it is
    /// what [`ShapingTable::site_for`] can make: lower-case letters, digits, `-`, `_`, `.`
    /// and `,`, not empty, at most [`MAX_SITE_KEY_LEN`] characters.
    pub fn parse(text: &str) -> Option<Self> {
        let fits = !text.is_empty() && text.len() <= MAX_SITE_KEY_LEN;
        let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.' | b',');
        (fits && text.bytes().all(allowed)).then(|| Self(text.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the site is a suffix of the table rather than a set of hosts or a domain.
    pub fn is_suffix(&self) -> bool {
        self.0.starts_with('.')
    }
}

impl fmt::Display for SiteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One configured suffix: its limits and its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Site {
    limits: SiteLimits,
    /// The operator's rules for this site, checked first.
    operator_rules: Vec<AdaptiveRule>,
    /// The built-in rules, checked after every operator rule.
    builtin_rules: Vec<AdaptiveRule>,
}

/// One layer of configuration: the built-in table, or the operator's file.
#[derive(Debug, Default)]
pub(crate) struct Layer {
    pub default: LimitsPatch,
    pub default_rules: Vec<AdaptiveRule>,
    /// By suffix, lower-case with its leading dot.
    pub sites: BTreeMap<String, (LimitsPatch, Vec<AdaptiveRule>)>,
}

/// The limits and rules of every site (contract §12, "Destinations" and "Adaptive").
/// [`ShapingTable::default`] is the built-in table; [`ShapingTable::from_toml`] puts the
/// operator's file over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapingTable {
    default: SiteLimits,
    /// The operator's rules of `[default]`, checked for every site after its own.
    default_rules: Vec<AdaptiveRule>,
    sites: BTreeMap<String, Site>,
}

/// The general default, KumoMTA's published shaping file's `default`
/// (<https://github.com/KumoCorp/kumomta/blob/main/assets/policy-extras/shaping.toml>):
/// 10 connections, 100 messages per connection, 100 messages a second, opportunistic TLS.
fn builtin_default() -> SiteLimits {
    SiteLimits {
        connection_limit: 10,
        max_deliveries_per_connection: 100,
        max_message_rate: MessageRate::HUNDRED_PER_SECOND,
        tls: TlsRequirement::Opportunistic,
    }
}

/// The built-in sites. Numbers are KumoMTA's published shaping file's for each provider;
/// none of them sets a message rate there, so the default's applies.
fn builtin() -> Layer {
    let patch = |connections: Option<u32>, per_connection: u32, tls: Option<TlsRequirement>| LimitsPatch {
        connection_limit: connections,
        max_deliveries_per_connection: Some(per_connection),
        max_message_rate: None,
        tls,
    };
    // Google (Gmail and Workspace): 5 connections, 50 per connection; TLS required, as
    // KumoMTA's file had it and as Google's sender guidelines require of bulk senders.
    let google = patch(Some(5), 50, Some(TlsRequirement::Required));
    // Yahoo (and AOL, on the same MX hosts): 20 per connection, Yahoo's own number in
    // KumoMTA's file ("provided by Yahoo directly").
    let yahoo = patch(None, 20, None);
    // Microsoft consumer (Outlook.com, Hotmail) and 365 are separate edge groups: 5
    // connections and 50 per connection each.
    let microsoft = patch(Some(5), 50, None);
    // Apple (iCloud): 10 connections, 5 per connection, from Apple's postmaster page
    // (<https://support.apple.com/en-us/102322>) as KumoMTA's file gives it.
    let apple = patch(Some(10), 5, None);
    let sites = [
        (".google.com", google.clone(), rules::google()),
        (".googlemail.com", google, rules::google()),
        (".yahoodns.net", yahoo, rules::yahoo()),
        (".olc.protection.outlook.com", microsoft.clone(), rules::microsoft()),
        (".mail.protection.outlook.com", microsoft, rules::microsoft()),
        (".mail.icloud.com", apple, Vec::new()),
    ];
    Layer {
        default: LimitsPatch::default(),
        default_rules: Vec::new(),
        sites: sites.into_iter().map(|(suffix, patch, rules)| (suffix.to_owned(), (patch, rules))).collect(),
    }
}

impl Default for ShapingTable {
    /// The built-in table, as when no file is given.
    fn default() -> Self {
        Self::layered(Layer::default())
    }
}

impl ShapingTable {
    /// The built-in table with `operator` over it: its `[default]` fields over the built-in
    /// default, each site's fields over the built-in site's (or, for a site the built-in
    /// table lacks, over the default), its rules before the built-in ones.
    pub(crate) fn layered(operator: Layer) -> Self {
        let builtin = builtin();
        let default = operator.default.over(&builtin.default.over(&builtin_default()));
        let mut sites: BTreeMap<String, Site> = builtin
            .sites
            .into_iter()
            .map(|(suffix, (patch, rules))| {
                let site = Site { limits: patch.over(&default), operator_rules: Vec::new(), builtin_rules: rules };
                (suffix, site)
            })
            .collect();
        for (suffix, (patch, rules)) in operator.sites {
            let site = sites.entry(suffix).or_insert_with(|| Site {
                limits: default.clone(),
                operator_rules: Vec::new(),
                builtin_rules: Vec::new(),
            });
            site.limits = patch.over(&site.limits);
            site.operator_rules = rules;
        }
        let mut default_rules = operator.default_rules;
        default_rules.extend(builtin.default_rules);
        Self { default, default_rules, sites }
    }

    /// The limits of a site no suffix names.
    pub fn default_limits(&self) -> &SiteLimits {
        &self.default
    }

    /// Every configured suffix with its limits, in order of the suffix.
    pub fn suffixes(&self) -> impl Iterator<Item = (&str, &SiteLimits)> {
        self.sites.iter().map(|(suffix, site)| (suffix.as_str(), &site.limits))
    }

    /// The site of `domain`, whose MX records are `mx_hosts` (preference, host name), and its
    /// limits. The most preferred host (lowest preference; of equals, the first by name)
    /// decides: the longest configured suffix it ends with (`.google.com` for
    /// `aspmx.l.google.com`, never for `evilgoogle.com`), compared without case or a
    /// trailing dot (leading dots, which no host name has, are dropped). Without a match, the site is the sorted, deduplicated host names, so
    /// domains with the same MX hosts share it; without MX records (or only a null MX,
    /// `.`), the domain itself.
    pub fn site_for(&self, mx_hosts: &[(u16, String)], domain: &DomainName) -> (SiteKey, &SiteLimits) {
        let mut hosts: Vec<(u16, String)> = mx_hosts
            .iter()
            .map(|(preference, host)| (*preference, normalise(host)))
            .filter(|(_, host)| !host.is_empty())
            .collect();
        hosts.sort();
        let Some((_, preferred)) = hosts.first() else {
            return (SiteKey(domain.as_str().to_owned()), &self.default);
        };
        let matched = self
            .sites
            .iter()
            .filter(|(suffix, _)| preferred.ends_with(suffix.as_str()))
            .max_by_key(|(suffix, _)| suffix.len());
        if let Some((suffix, site)) = matched {
            return (SiteKey(suffix.clone()), &site.limits);
        }
        let mut names: Vec<String> = hosts.into_iter().map(|(_, host)| host).collect();
        names.sort();
        names.dedup();
        names.truncate(MAX_HOSTS_IN_KEY);
        (SiteKey(names.join(",")), &self.default)
    }

    /// The limits of `site`: its suffix's, or the default's.
    pub fn limits(&self, site: &SiteKey) -> &SiteLimits {
        self.sites.get(site.as_str()).map_or(&self.default, |s| &s.limits)
    }

    /// The rules that apply to `site`, in the order they are checked: the operator's for the
    /// site, the operator's `[default]` ones, then the built-in ones for the site.
    pub fn rules(&self, site: &SiteKey) -> impl Iterator<Item = &AdaptiveRule> {
        let site = self.sites.get(site.as_str());
        let own = site.into_iter().flat_map(|s| s.operator_rules.iter());
        let builtin = site.into_iter().flat_map(|s| s.builtin_rules.iter());
        own.chain(self.default_rules.iter()).chain(builtin)
    }

    /// What `reply` (a server's whole reply: code, enhanced code, text) received from
    /// `site` at `now` does to the site: the first of its [`ShapingTable::rules`] that
    /// matches, or `None`.
    pub fn react(&self, site: &SiteKey, reply: &str, now: DateTime<Utc>) -> Option<Reaction> {
        self.rules(site).find_map(|rule| rule.react(reply, now))
    }
}

/// A host name as suffixes are compared with it: lower-case, without its trailing dot, and
/// without leading dots (no host name has one), so that only a suffix's key starts with a dot.
fn normalise(host: &str) -> String {
    let host = host.trim();
    host.strip_suffix('.').unwrap_or(host).trim_start_matches('.').to_ascii_lowercase()
}
