//! Procedural macros for provrun: the `#[tool]` attribute that turns a Rust fn into a tool.
//!
//! Use the macro through `provrun_tools::tool` (or `provrun::tool` from the facade); this
//! crate only generates code and has no runtime of its own. What the attribute reads and
//! generates is documented on [`macro@tool`].

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Pat, Path, ReturnType, Type,
    parse_macro_input,
};

/// Turn a free function into a provrun tool and register it at link time.
///
/// ```ignore
/// use provrun_tools::{tool, RunContext};
///
/// /// Count the words in a text.
/// ///
/// /// Everything after the first paragraph stays out of the tool's description.
/// #[tool(category = "read", summary = "Count words")]
/// fn word_count(
///     /// The text to count.
///     text: String,
/// ) -> usize {
///     text.split_whitespace().count()
/// }
/// ```
///
/// What it reads:
/// - the tool's name: the fn's name, or `name = "…"`;
/// - its description: the first paragraph of the fn's doc comment (or `description = "…"`);
///   a tool with neither is a compile error, because the model needs one;
/// - each parameter's doc comment: that property's `description` in the schema;
/// - each parameter's type: its JSON Schema (schemars) and its parsing (serde), so every
///   parameter type must implement `serde::Deserialize` and `schemars::JsonSchema`, and be
///   owned (`String`, not `&str`). `Option<T>` parameters are optional;
/// - `#[schemars(…)]` and `#[serde(…)]` on a parameter: applied to that argument, e.g.
///   `#[schemars(example = "/input/notes.txt")]` adds an `examples` entry to its schema;
/// - a leading `ctx: &RunContext` parameter: the run's context, never part of the schema;
/// - options `destructive`, `category = "read" | "write" | "execute" | "network" | "search"
///   | "other"`, `confirm = "…"`, `summary = "…"`, `mode = "in_process" |
///   "client_round_trip" | "remote_mcp"`.
///
/// What it generates, beside the unchanged fn: a unit struct named after the fn in
/// PascalCase with a `Tool` suffix (`word_count` → `WordCountTool`) whose `tool()` returns
/// the [`Tool`](../provrun_tools/struct.Tool.html), and an `inventory` registration so that
/// `ToolRegistry::linked()` finds it.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item, quote!(::provrun_tools))
}

/// The same attribute as [`macro@tool`], for code that depends on the `provrun` facade
/// crate instead of `provrun-tools`; the facade re-exports it as `provrun::tool`.
#[proc_macro_attribute]
pub fn facade_tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item, quote!(::provrun::tools))
}

fn expand(attr: TokenStream, item: TokenStream, default_krate: TokenStream2) -> TokenStream {
    let mut options = Options::default();
    let parser = syn::meta::parser(|meta| options.parse(meta));
    parse_macro_input!(attr with parser);
    let func = parse_macro_input!(item as ItemFn);
    match generate(options, func, default_krate) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// The attribute's options, as written.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    description: Option<LitStr>,
    destructive: bool,
    category: Option<LitStr>,
    confirm: Option<LitStr>,
    summary: Option<LitStr>,
    mode: Option<LitStr>,
    krate: Option<Path>,
}

const CATEGORIES: &[(&str, &str)] = &[
    ("read", "Read"),
    ("write", "Write"),
    ("execute", "Execute"),
    ("network", "Network"),
    ("search", "Search"),
    ("other", "Other"),
];

const MODES: &[(&str, &str)] = &[
    ("in_process", "InProcess"),
    ("client_round_trip", "ClientRoundTrip"),
    ("remote_mcp", "RemoteMcp"),
];

impl Options {
    fn parse(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
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

/// Lines of the `#[doc]` attributes, each with the one space rustdoc puts after `///` removed.
fn doc_lines(attrs: &[Attribute]) -> Vec<String> {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
        {
            // `split`, not `lines`: an empty `///` line is a paragraph break and must stay.
            for line in s.value().split('\n') {
                lines.push(
                    line.strip_prefix(' ')
                        .unwrap_or(line)
                        .trim_end()
                        .to_string(),
                );
            }
        }
    }
    lines
}

/// The first paragraph of a doc comment, its lines joined by spaces.
fn first_paragraph(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| l.trim())
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whole doc text, paragraphs kept, for a parameter's description.
fn whole_doc(lines: &[String]) -> String {
    lines.join("\n").trim().to_string()
}

fn pascal_case(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

/// Whether `ty` names `RunContext` (by its last path segment), and whether by reference.
fn context_kind(ty: &Type) -> Option<bool> {
    fn names_context(ty: &Type) -> bool {
        match ty {
            Type::Path(p) => p
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "RunContext"),
            Type::Paren(p) => names_context(&p.elem),
            Type::Group(g) => names_context(&g.elem),
            _ => false,
        }
    }
    match ty {
        Type::Reference(r) if names_context(&r.elem) => Some(true),
        other if names_context(other) => Some(false),
        _ => None,
    }
}

/// A valid tool name: what OpenAI-compatible APIs accept (`^[a-zA-Z0-9_.-]{1,64}$`).
fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

struct Param {
    ident: Ident,
    ty: Type,
    doc: String,
    optional: bool,
    /// `#[schemars]` / `#[serde]` attributes moved from the parameter to its field.
    attrs: Vec<Attribute>,
}

fn is_option(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => {
            p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Option")
        }
        Type::Group(g) => is_option(&g.elem),
        _ => false,
    }
}

fn generate(
    options: Options,
    mut func: ItemFn,
    default_krate: TokenStream2,
) -> syn::Result<TokenStream2> {
    let krate = options
        .krate
        .as_ref()
        .map(|p| quote!(#p))
        .unwrap_or(default_krate);
    let sig = &func.sig;
    if let Some(generics) = sig.generics.params.first() {
        return Err(syn::Error::new(
            generics.span(),
            "#[tool] functions cannot be generic: the argument schema must be known at compile time",
        ));
    }
    if let Some(c) = &sig.constness {
        return Err(syn::Error::new(
            c.span(),
            "#[tool] cannot be used on a const fn",
        ));
    }
    if let Some(u) = &sig.unsafety {
        return Err(syn::Error::new(
            u.span(),
            "#[tool] cannot be used on an unsafe fn",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new(
            v.span(),
            "#[tool] functions cannot be variadic",
        ));
    }

    let fn_ident = sig.ident.clone();
    let fn_name = fn_ident.to_string();
    let fn_name = fn_name.strip_prefix("r#").unwrap_or(&fn_name).to_string();
    let tool_name = options
        .name
        .as_ref()
        .map(LitStr::value)
        .unwrap_or_else(|| fn_name.clone());
    if !valid_tool_name(&tool_name) {
        let span = options.name.as_ref().map_or(fn_ident.span(), LitStr::span);
        return Err(syn::Error::new(
            span,
            format!(
                "`{tool_name}` is not a valid tool name: use 1 to 64 ASCII letters, digits, `_` or `-` (what OpenAI-compatible providers accept)"
            ),
        ));
    }

    let description = match &options.description {
        Some(d) => d.value(),
        None => first_paragraph(&doc_lines(&func.attrs)),
    };
    if description.trim().is_empty() {
        return Err(syn::Error::new(
            fn_ident.span(),
            format!(
                "tool `{tool_name}` has no description: add a doc comment (its first paragraph \
                 becomes the description the model reads) or `description = \"…\"`"
            ),
        ));
    }

    // Walk the parameters: a leading context, then the arguments.
    let mut takes_context = false;
    let mut params: Vec<Param> = Vec::new();
    let inputs_len = func.sig.inputs.len();
    for (index, input) in func.sig.inputs.iter_mut().enumerate() {
        let typed = match input {
            FnArg::Receiver(r) => {
                return Err(syn::Error::new(
                    r.span(),
                    "#[tool] must be on a free function, not a method with `self`",
                ));
            }
            FnArg::Typed(t) => t,
        };
        // Take the parameter's doc comment and remove it: rustc rejects doc comments on
        // parameters, and it belongs in the schema anyway.
        let doc = whole_doc(&doc_lines(&typed.attrs));
        typed.attrs.retain(|a| !a.path().is_ident("doc"));
        // `#[schemars(…)]` and `#[serde(…)]` on a parameter belong to its schema and its
        // parsing: move them onto the generated field (rustc rejects them on parameters).
        let (field_attrs, kept): (Vec<Attribute>, Vec<Attribute>) =
            std::mem::take(&mut typed.attrs)
                .into_iter()
                .partition(|a| a.path().is_ident("schemars") || a.path().is_ident("serde"));
        typed.attrs = kept;

        if let Some(by_ref) = context_kind(&typed.ty) {
            if index != 0 {
                return Err(syn::Error::new(
                    typed.ty.span(),
                    "the context parameter must come first: `fn name(ctx: &RunContext, …)`",
                ));
            }
            if !by_ref {
                return Err(syn::Error::new(
                    typed.ty.span(),
                    "take the context by reference: `ctx: &RunContext`",
                ));
            }
            takes_context = true;
            continue;
        }
        let ident = match &*typed.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "#[tool] parameters must be plain names (no patterns): the name is the argument's name",
                ));
            }
        };
        if let Type::Reference(r) = &*typed.ty {
            return Err(syn::Error::new(
                r.span(),
                "tool arguments must be owned types, since they are parsed from JSON: \
                 use `String` instead of `&str`, `Vec<T>` instead of `&[T]`",
            ));
        }
        if let Type::ImplTrait(t) = &*typed.ty {
            return Err(syn::Error::new(
                t.span(),
                "tool arguments cannot be `impl Trait`: name a concrete type",
            ));
        }
        let optional = is_option(&typed.ty);
        params.push(Param {
            ident,
            ty: (*typed.ty).clone(),
            doc,
            optional,
            attrs: field_attrs,
        });
    }
    let _ = inputs_len;

    let is_async = func.sig.asyncness.is_some();
    let vis = func.vis.clone();
    let struct_ident = format_ident!("{}Tool", pascal_case(&fn_name), span = fn_ident.span());
    let args_ident = Ident::new("__ProvrunToolArgs", Span::mixed_site());

    let field_defs = params.iter().map(|p| {
        let ident = &p.ident;
        let ty = &p.ty;
        let doc = if p.doc.is_empty() {
            quote!()
        } else {
            let d = &p.doc;
            quote!(#[doc = #d])
        };
        let default = if p.optional {
            quote!(#[serde(default)])
        } else {
            quote!()
        };
        let attrs = &p.attrs;
        quote!(#doc #default #(#attrs)* #ident: #ty,)
    });
    // A readable error, on the parameter's own type, when it cannot be an argument.
    let arg_checks = params.iter().map(|p| {
        let ty = &p.ty;
        quote_spanned! {ty.span()=>
            #krate::__private::assert_tool_arg::<#ty>();
        }
    });
    let field_idents: Vec<&Ident> = params.iter().map(|p| &p.ident).collect();
    let ctx_arg = if takes_context {
        quote!(__ctx,)
    } else {
        quote!()
    };

    let ret_span = match &func.sig.output {
        ReturnType::Default => func.sig.ident.span(),
        ReturnType::Type(_, ty) => ty.span(),
    };
    let into_output = quote_spanned! {ret_span=>
        #krate::__private::into_tool_output(__ret)
    };

    // Bind the context (refusing a call without one when the tool takes it); the same
    // for sync and async bodies.
    let ctx_bind = if takes_context {
        quote! {
            let __ctx = match __ctx {
                ::core::option::Option::Some(c) => c,
                ::core::option::Option::None => {
                    return ::core::result::Result::Err(#krate::ToolError::ContextRequired {
                        tool: #tool_name.to_string(),
                    });
                }
            };
        }
    } else {
        quote!(let _ = __ctx;)
    };
    let handler = if is_async {
        let call_ctx = if takes_context {
            quote!(&__ctx,)
        } else {
            quote!()
        };
        quote! {
            #krate::__private::async_handler(
                move |__ctx: ::core::option::Option<#krate::RunContext>,
                 __args: #krate::__private::JsonMap| {
                    #ctx_bind
                    let __parsed: #args_ident = match #krate::__private::parse_args(#tool_name, __args) {
                        ::core::result::Result::Ok(a) => a,
                        ::core::result::Result::Err(out) => {
                            return ::core::result::Result::Ok(#krate::__private::ready(out));
                        }
                    };
                    let #args_ident { #(#field_idents,)* } = __parsed;
                    ::core::result::Result::Ok(#krate::__private::boxed(async move {
                        let __ret = #fn_ident(#call_ctx #(#field_idents),*).await;
                        #into_output
                    }))
                },
            )
        }
    } else {
        quote! {
            #krate::__private::sync_handler(
                move |__ctx: ::core::option::Option<&#krate::RunContext>,
                 __args: #krate::__private::JsonMap| {
                    #ctx_bind
                    let __parsed: #args_ident = match #krate::__private::parse_args(#tool_name, __args) {
                        ::core::result::Result::Ok(a) => a,
                        ::core::result::Result::Err(out) => return ::core::result::Result::Ok(out),
                    };
                    let #args_ident { #(#field_idents,)* } = __parsed;
                    let __ret = #fn_ident(#ctx_arg #(#field_idents),*);
                    ::core::result::Result::Ok(#into_output)
                },
            )
        }
    };

    let category = match &options.category {
        Some(c) => {
            let variant = CATEGORIES
                .iter()
                .find(|(k, _)| *k == c.value())
                .map(|(_, v)| format_ident!("{}", v))
                .unwrap_or_else(|| format_ident!("Other"));
            quote!(#krate::ToolCategory::#variant)
        }
        None => quote!(#krate::ToolCategory::Other),
    };
    let mode = match &options.mode {
        Some(m) => {
            let variant = MODES
                .iter()
                .find(|(k, _)| *k == m.value())
                .map(|(_, v)| format_ident!("{}", v))
                .unwrap_or_else(|| format_ident!("InProcess"));
            quote!(#krate::ToolMode::#variant)
        }
        None => quote!(#krate::ToolMode::InProcess),
    };
    let destructive = options.destructive;
    let confirm = opt_string(&options.confirm);
    let summary = opt_string(&options.summary);
    let struct_doc = format!(
        "The `{tool_name}` tool, generated by `#[tool]` on `{fn_name}`: `{}::tool()` returns it.",
        struct_ident
    );

    let serde_path = quote!(#krate::__private::serde)
        .to_string()
        .replace(' ', "");
    let schemars_path = quote!(#krate::__private::schemars)
        .to_string()
        .replace(' ', "");

    Ok(quote! {
        #func

        #[doc = #struct_doc]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug, ::core::default::Default)]
        #vis struct #struct_ident;

        const _: () = {
            #[derive(#krate::__private::serde::Deserialize, #krate::__private::schemars::JsonSchema)]
            #[serde(crate = #serde_path, deny_unknown_fields)]
            #[schemars(crate = #schemars_path)]
            struct #args_ident {
                #(#field_defs)*
            }

            #[allow(dead_code)]
            fn __provrun_check_args() {
                #(#arg_checks)*
            }

            impl #struct_ident {
                /// The tool, built once per process (its schema is computed at registration).
                #vis fn tool() -> #krate::Tool {
                    static CELL: ::std::sync::OnceLock<#krate::Tool> = ::std::sync::OnceLock::new();
                    CELL.get_or_init(|| {
                        #krate::__private::build_tool(#krate::__private::ToolParts {
                            name: #tool_name,
                            description: #description,
                            schema: #krate::__private::schema_for::<#args_ident>(),
                            mode: #mode,
                            destructive: #destructive,
                            category: #category,
                            confirm: #confirm,
                            summary: #summary,
                            takes_context: #takes_context,
                            handler: #handler,
                        })
                    })
                    .clone()
                }
            }

            impl ::core::convert::From<#struct_ident> for #krate::Tool {
                fn from(_: #struct_ident) -> Self {
                    #struct_ident::tool()
                }
            }

            #krate::__private::inventory::submit! {
                #krate::__private::LinkedTool::new(#struct_ident::tool)
            }
        };
    })
}

fn opt_string(value: &Option<LitStr>) -> TokenStream2 {
    match value {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}
