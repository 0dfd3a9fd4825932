//! What a name's words say about its file, the evidence the rules of
//! [`super`] take from a name: read from the name itself, or, in an
//! anonymized trace whose names are keyed hashes, from the bits recorded
//! beside each name before it was hashed (`path_traits`, see
//! [`iorepro_format::schema::traits`]). [`of`] makes those bits; the rules
//! ask an [`Evidence`] and never care which of the two it is. Both are the
//! format's ([`iorepro_format::path_traits`]): the collector records the
//! bits by the same rules.

pub use iorepro_format::path_traits::{of, Evidence};
