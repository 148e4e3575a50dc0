//! The `#[tool(…)]` attribute's options ([`Options`]): name, description, destructive,
//! category, confirm, summary and mode, each checked as it is read.

use syn::{Ident, LitStr, Path};

/// The attribute's options, as written.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) name: Option<LitStr>,
    pub(crate) description: Option<LitStr>,
    pub(crate) destructive: bool,
    pub(crate) category: Option<LitStr>,
    pub(crate) confirm: Option<LitStr>,
    pub(crate) summary: Option<LitStr>,
    pub(crate) mode: Option<LitStr>,
    pub(crate) krate: Option<Path>,
}

pub(crate) const CATEGORIES: &[(&str, &str)] = &[
    ("read", "Read"),
    ("write", "Write"),
    ("execute", "Execute"),
    ("network", "Network"),
    ("search", "Search"),
    ("other", "Other"),
];

pub(crate) const MODES: &[(&str, &str)] = &[
    ("in_process", "InProcess"),
    ("client_round_trip", "ClientRoundTrip"),
    ("remote_mcp", "RemoteMcp"),
];

impl Options {
    pub(crate) fn parse(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "name" => self.name = Some(string_or_ident(&meta)?),
            "description" => self.description = Some(meta.value()?.parse()?),
            "destructive" => {
                self.destructive = if meta.input.peek(syn::Token![=]) {
                    let value: syn::LitBool = meta.value()?.parse()?;
                    value.value
                } else {
                    true
                }
            }
            "category" => {
                let value = string_or_ident(&meta)?;
                let lower = value.value().to_ascii_lowercase();
                if !CATEGORIES.iter().any(|(k, _)| *k == lower) {
                    return Err(syn::Error::new(
                        value.span(),
                        format!(
                            "unknown tool category `{}`; expected one of: {}",
                            value.value(),
                            CATEGORIES
                                .iter()
                                .map(|(k, _)| *k)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                self.category = Some(LitStr::new(&lower, value.span()));
            }
            "confirm" => self.confirm = Some(meta.value()?.parse()?),
            "summary" => self.summary = Some(meta.value()?.parse()?),
            "mode" => {
                let value = string_or_ident(&meta)?;
                let normal = normalise_mode(&value.value());
                if !MODES.iter().any(|(k, _)| *k == normal) {
                    return Err(syn::Error::new(
                        value.span(),
                        format!(
                            "unknown tool mode `{}`; expected one of: {}",
                            value.value(),
                            MODES.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                self.mode = Some(LitStr::new(&normal, value.span()));
            }
            "crate" => {
                let value: LitStr = meta.value()?.parse()?;
                self.krate = Some(value.parse()?);
            }
            _ => {
                return Err(meta.error(
                    "unknown #[tool] option; expected one of: name, description, destructive, \
                     category, confirm, summary, mode, crate",
                ));
            }
        }
        Ok(())
    }
}

/// Accept `key = "text"` or `key = Ident` (for `category = Read`, `mode = InProcess`).
fn string_or_ident(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        value.parse()
    } else {
        let ident: Ident = value.parse()?;
        Ok(LitStr::new(&ident.to_string(), ident.span()))
    }
}

/// `InProcess` → `in_process`; `in_process` stays.
fn normalise_mode(raw: &str) -> String {
    let mut out = String::new();
    for (i, ch) in raw.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}
