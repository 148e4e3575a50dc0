//! The code `#[tool]` writes: the fn kept, its parameters read (the optional leading
//! context, each argument's type, doc and serde/schemars attributes), an argument struct
//! for the schema and parsing, the `…Tool` unit struct and its link-time registration.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, ItemFn, LitStr, Pat, PatType, ReturnType, Signature, Type};

use crate::docs::{doc_lines, first_paragraph, whole_doc};
use crate::options::{CATEGORIES, MODES, Options};

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

/// A valid tool name: 1 to 64 ASCII letters, digits, `_` or `-` (`^[a-zA-Z0-9_-]{1,64}$`),
/// which every OpenAI-compatible API accepts; `.` is refused, as `is_valid_tool_name` does.
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

pub(crate) fn generate(
    options: Options,
    mut func: ItemFn,
    default_krate: TokenStream2,
) -> syn::Result<TokenStream2> {
    let krate = options
        .krate
        .as_ref()
        .map(|p| quote!(#p))
        .unwrap_or(default_krate);
    check_signature(&func.sig)?;

    let fn_ident = func.sig.ident.clone();
    let fn_name = fn_ident.to_string();
    let fn_name = fn_name.strip_prefix("r#").unwrap_or(&fn_name).to_string();
    let tool_name = tool_name(&options, &fn_ident, &fn_name)?;
    let description = description(&options, &func.attrs, &fn_ident, &tool_name)?;
    let (takes_context, params) = read_params(&mut func.sig)?;

    let struct_ident = format_ident!("{}Tool", pascal_case(&fn_name), span = fn_ident.span());
    let tool = ToolDef {
        krate,
        options,
        func,
        fn_name,
        tool_name,
        description,
        takes_context,
        params,
        struct_ident,
        args_ident: Ident::new("__ProvrunToolArgs", Span::mixed_site()),
    };
    Ok(tool.expand())
}

/// Refuses the signatures a tool cannot have: generic, const, unsafe or variadic.
fn check_signature(sig: &Signature) -> syn::Result<()> {
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
    Ok(())
}

/// The tool's name: `name = "…"` if given, else the fn's own name; refused if not valid.
fn tool_name(options: &Options, fn_ident: &Ident, fn_name: &str) -> syn::Result<String> {
    let tool_name = options
        .name
        .as_ref()
        .map(LitStr::value)
        .unwrap_or_else(|| fn_name.to_string());
    if !valid_tool_name(&tool_name) {
        let span = options.name.as_ref().map_or(fn_ident.span(), LitStr::span);
        return Err(syn::Error::new(
            span,
            format!(
                "`{tool_name}` is not a valid tool name: use 1 to 64 ASCII letters, digits, `_` or `-` (what OpenAI-compatible providers accept)"
            ),
        ));
    }
    Ok(tool_name)
}

/// The description the model reads: `description = "…"` if given, else the first paragraph
/// of the fn's doc comment; refused if empty.
fn description(
    options: &Options,
    attrs: &[Attribute],
    fn_ident: &Ident,
    tool_name: &str,
) -> syn::Result<String> {
    let description = match &options.description {
        Some(d) => d.value(),
        None => first_paragraph(&doc_lines(attrs)),
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
    Ok(description)
}

/// Walks the parameters: a leading context, then the arguments. Returns whether the fn
/// takes the context, and the arguments.
fn read_params(sig: &mut Signature) -> syn::Result<(bool, Vec<Param>)> {
    let mut takes_context = false;
    let mut params: Vec<Param> = Vec::new();
    for (index, input) in sig.inputs.iter_mut().enumerate() {
        let typed = match input {
            FnArg::Receiver(r) => {
                return Err(syn::Error::new(
                    r.span(),
                    "#[tool] must be on a free function, not a method with `self`",
                ));
            }
            FnArg::Typed(t) => t,
        };
        match read_param(index, typed)? {
            Some(param) => params.push(param),
            None => takes_context = true,
        }
    }
    Ok((takes_context, params))
}

/// Reads one parameter, taking its doc and schema attributes off it. `None` for the
/// context parameter (checked to come first and by reference).
fn read_param(index: usize, typed: &mut PatType) -> syn::Result<Option<Param>> {
    // Take the parameter's doc comment and remove it: rustc rejects doc comments on
    // parameters, and it belongs in the schema anyway.
    let doc = whole_doc(&doc_lines(&typed.attrs));
    typed.attrs.retain(|a| !a.path().is_ident("doc"));
    // `#[schemars(…)]` and `#[serde(…)]` on a parameter belong to its schema and its
    // parsing: move them onto the generated field (rustc rejects them on parameters).
    let (field_attrs, kept): (Vec<Attribute>, Vec<Attribute>) = std::mem::take(&mut typed.attrs)
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
        return Ok(None);
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
    Ok(Some(Param {
        ident,
        ty: (*typed.ty).clone(),
        doc,
        optional,
        attrs: field_attrs,
    }))
}

/// Everything read from the fn and its attribute, from which the code is written.
struct ToolDef {
    krate: TokenStream2,
    options: Options,
    func: ItemFn,
    fn_name: String,
    tool_name: String,
    description: String,
    takes_context: bool,
    params: Vec<Param>,
    /// The generated `…Tool` unit struct.
    struct_ident: Ident,
    /// The generated argument struct (hygienic: callers cannot name it).
    args_ident: Ident,
}

impl ToolDef {
    /// The argument struct's fields, one per argument, with its doc and attributes.
    fn field_defs(&self) -> Vec<TokenStream2> {
        self.params
            .iter()
            .map(|p| {
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
            })
            .collect()
    }

    /// A readable error, on the parameter's own type, when it cannot be an argument.
    fn arg_checks(&self) -> Vec<TokenStream2> {
        let krate = &self.krate;
        self.params
            .iter()
            .map(|p| {
                let ty = &p.ty;
                quote_spanned! {ty.span()=>
                    #krate::__private::assert_tool_arg::<#ty>();
                }
            })
            .collect()
    }

    /// The handler closure: binds the context, parses the arguments, calls the fn and
    /// turns its return value into the tool's output (sync or async, as the fn is).
    fn handler(&self) -> TokenStream2 {
        let krate = &self.krate;
        let tool_name = &self.tool_name;
        let args_ident = &self.args_ident;
        let sig = &self.func.sig;
        let fn_ident = &sig.ident;
        let field_idents: Vec<&Ident> = self.params.iter().map(|p| &p.ident).collect();

        let ret_span = match &sig.output {
            ReturnType::Default => sig.ident.span(),
            ReturnType::Type(_, ty) => ty.span(),
        };
        let into_output = quote_spanned! {ret_span=>
            #krate::__private::into_tool_output(__ret)
        };
        let ctx_bind = self.ctx_bind();
        if sig.asyncness.is_some() {
            let call_ctx = if self.takes_context {
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
            let ctx_arg = if self.takes_context {
                quote!(__ctx,)
            } else {
                quote!()
            };
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
        }
    }

    /// Binds the context (refusing a call without one when the tool takes it); the same
    /// for sync and async bodies.
    fn ctx_bind(&self) -> TokenStream2 {
        let krate = &self.krate;
        let tool_name = &self.tool_name;
        if self.takes_context {
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
        }
    }

    /// The `ToolCategory` variant named by `category = "…"` (`Other` if none).
    fn category(&self) -> TokenStream2 {
        let krate = &self.krate;
        match &self.options.category {
            Some(c) => {
                let variant = CATEGORIES
                    .iter()
                    .find(|(k, _)| *k == c.value())
                    .map(|(_, v)| format_ident!("{}", v))
                    .unwrap_or_else(|| format_ident!("Other"));
                quote!(#krate::ToolCategory::#variant)
            }
            None => quote!(#krate::ToolCategory::Other),
        }
    }

    /// The `ToolMode` variant named by `mode = "…"` (`InProcess` if none).
    fn mode(&self) -> TokenStream2 {
        let krate = &self.krate;
        match &self.options.mode {
            Some(m) => {
                let variant = MODES
                    .iter()
                    .find(|(k, _)| *k == m.value())
                    .map(|(_, v)| format_ident!("{}", v))
                    .unwrap_or_else(|| format_ident!("InProcess"));
                quote!(#krate::ToolMode::#variant)
            }
            None => quote!(#krate::ToolMode::InProcess),
        }
    }

    /// The whole output: the fn unchanged, the `…Tool` struct, the argument struct, the
    /// `tool()` constructor, the `From` impl and the link-time registration.
    fn expand(&self) -> TokenStream2 {
        let Self {
            krate,
            options,
            func,
            fn_name,
            tool_name,
            description,
            takes_context,
            struct_ident,
            args_ident,
            ..
        } = self;
        let vis = &func.vis;
        let field_defs = self.field_defs();
        let arg_checks = self.arg_checks();
        let handler = self.handler();
        let category = self.category();
        let mode = self.mode();
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

        quote! {
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
        }
    }
}

fn opt_string(value: &Option<LitStr>) -> TokenStream2 {
    match value {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}
