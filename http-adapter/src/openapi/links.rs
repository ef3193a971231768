//! OpenAPI `links` from the operations that create a resource to the operations on it, so
//! that a client generator, or schemathesis' stateful phase, can chain them: without them a
//! fuzzer reaches `/v1/domains/{id}` only with ids it made up, which are never found.
//!
//! The rule, from the paths alone: a 2xx of `POST <collection>` answers the created resource
//! in `data`; every operation on `<collection>/{name}` and below whose path parameters are
//! those of the collection and `name` gets a link from it, `name` taken from `data.<name>`
//! (`id`, a suppression's `email`, a sender's `username`) and the collection's own
//! parameters from the request's path. A link named by hand in a `#[utoipa::path]` (an
//! answer that is not a collection's, such as a test delivery) is kept.

use std::collections::BTreeMap;

use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::{OpenApi, PathItem, RefOr};

/// Adds the links of every creating operation of `api`.
pub fn add(api: &mut OpenApi) {
    let targets: Vec<(String, String)> = api
        .paths
        .paths
        .iter()
        .flat_map(|(path, item)| operation_ids(item).into_iter().map(move |id| (path.clone(), id)))
        .collect();
    for (collection, item) in api.paths.paths.iter_mut() {
        let Some(create) = item.post.as_mut() else { continue };
        let links: BTreeMap<&String, Vec<(String, String)>> =
            targets.iter().filter_map(|(path, id)| Some((id, link(collection, path)?))).collect();
        if links.is_empty() {
            continue;
        }
        for (status, response) in create.responses.responses.iter_mut() {
            let RefOr::T(response) = response else { continue };
            if !status.starts_with('2') {
                continue;
            }
            for (&id, parameters) in &links {
                let link = parameters.iter().fold(LinkBuilder::new().operation_id(id), |link, (name, value)| {
                    link.parameter(name, value.as_str())
                });
                response.links.entry(id.clone()).or_insert_with(|| link.build().into());
            }
        }
    }
}

/// The parameters of the link from a creation at `collection` to an operation at `path`, if
/// `path` is on the created resource and needs nothing else.
fn link(collection: &str, path: &str) -> Option<Vec<(String, String)>> {
    let rest = path.strip_prefix(collection)?.strip_prefix('/')?;
    let first = rest.split('/').next()?;
    let name = first.strip_prefix('{')?.strip_suffix('}')?;
    let unresolved = rest.split('/').skip(1).any(|segment| segment.starts_with('{'));
    if unresolved {
        return None;
    }
    let mut parameters = vec![(name.to_owned(), format!("$response.body#/data/{name}"))];
    for own in collection.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')) {
        parameters.push((own.to_owned(), format!("$request.path.{own}")));
    }
    Some(parameters)
}

fn operation_ids(item: &PathItem) -> Vec<String> {
    [&item.get, &item.put, &item.post, &item.delete, &item.patch]
        .into_iter()
        .filter_map(|op| op.as_ref()?.operation_id.clone())
        .collect()
}
