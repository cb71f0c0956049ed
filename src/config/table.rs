//! What a table of properties becomes. Every property is written once, as
//! a row of a table (`common/properties.rs`: the properties every client
//! takes; `consumer/properties.rs`, `producer/properties.rs`: each
//! client's own), and three macros read the tables:
//!
//! - [`property_values`] makes, for one table, the property name
//!   constants, the values as set (a builder struct, with every default)
//!   and as checked (a values struct), the parser of a value given by name
//!   (`parse`), each property's own check (`check_each`: its range), the
//!   move from the one to the other (`into_values`), the rendering of the
//!   values as properties (`render`), and, for the tests, the table's
//!   names and its rows of docs/configuration.md;
//! - [`property_getters`] and [`property_setters`] make a configuration's
//!   getters and a builder's typed setters, with their rustdoc.
//!
//! What several properties decide together (one bounds another, a value
//! computed from several) is not in the tables: each client's `build`
//! says it, in one place, and hands the values it computed to
//! `into_values` (the rows whose type is written `Builder => Config`).
//!
//! A row reads:
//!
//! ```text
//! FETCH_MIN_BYTES = "fetch.min.bytes" {      // the name constant, the name
//!     fetch_min_bytes: u32 = 1;             // field, getter and setter; type; default
//!     also ALIAS | ALIAS;                   // optional: other names parsed the same way
//!     parse: parse_u32;                     // fn(property, trimmed value) -> Result<T, Error>
//!                                           // (`parse untrimmed:` for the value as given)
//!     check int(0);                         // optional: ms(min, max), int(min) or with(fn)
//!     render: shown;                        // fn(&T) -> Option<String>, for to_properties
//!     get /// rustdoc
//!         -> u32;                           // getter's type; `{ .as_deref() }` or `= fn`
//!                                           // turns the field into it
//!     set /// rustdoc
//!         (bytes: u32);                     // optional: the setter's argument, and
//!                                           // `=> expr` to turn it into the field
//!     docs ["`u32`", "1", "meaning", "validation"];   // docs/configuration.md's columns
//! }
//! ```

/// One row of a property table in docs/configuration.md.
#[cfg(test)]
pub(super) struct PropertyDoc {
    /// The property's name.
    pub name: &'static str,
    /// Said after the name in the first column (another name it has).
    pub note: &'static str,
    /// The typed API: the getter's type, or the setter.
    pub typed: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
    pub validation: &'static str,
}

/// The values of one property table; see the module documentation.
///
/// `$Builder` and `$Values` hold the rows' fields (and the `extra` fields,
/// moved from one to the other as they are), `$Computed` the fields
/// `build` computes (the rows written `Builder => Config`). `unbound` lists
/// properties with a name and a row in the docs but no field: their
/// parsing and rendering are written by hand.
macro_rules! property_values {
    (
        $(#[$battr:meta])* $vis:vis builder $Builder:ident;
        $(#[$vattr:meta])* values $Values:ident;
        computed $Computed:ident;
        extra { $( $(#[$xattr:meta])* $x:ident: $xty:ty = $xdefault:expr; )* }
        rows {$(
            $NAME:ident = $prop:literal {
                $field:ident: $bty:ty $(=> $cty:ty)? = $default:expr;
                $(also $($alias:ident)|+;)?
                parse $($untrimmed:ident)?: $parse:expr;
                $(check $ckind:ident($($carg:expr),*);)?
                render: $render:expr;
                get $(#[$gdoc:meta])* -> $gret:ty $(= $gfn:path)? $({ $($gtail:tt)* })?;
                $(set $(#[$sdoc:meta])* ($sarg:ident: $sty:ty) $(=> $sconv:expr)?;)?
                docs [$typed:literal, $dflt:literal, $meaning:literal, $valid:literal $(, $note:literal)?];
            }
        )*}
        unbound {$(
            $UNAME:ident = $uprop:literal {
                docs [$utyped:literal, $udflt:literal, $umeaning:literal, $uvalid:literal];
            }
        )*}
    ) => {
        $( pub(in crate::config) const $NAME: &str = $prop; )*
        $( pub(in crate::config) const $UNAME: &str = $uprop; )*

        /// Every property of this table.
        #[cfg(test)]
        pub(in crate::config) const PROPERTIES: &[&str] = &[$($NAME,)* $($UNAME,)*];

        /// This table's rows of docs/configuration.md.
        #[cfg(test)]
        pub(in crate::config) const DOCS: &[$crate::config::table::PropertyDoc] = &[
            $($crate::config::table::PropertyDoc {
                name: $prop,
                note: concat!("" $(, $note)?),
                typed: $typed,
                default: $dflt,
                meaning: $meaning,
                validation: $valid,
            },)*
            $($crate::config::table::PropertyDoc {
                name: $uprop,
                note: "",
                typed: $utyped,
                default: $udflt,
                meaning: $umeaning,
                validation: $uvalid,
            },)*
        ];

        $(#[$battr])*
        $vis struct $Builder {
            $( $(#[$xattr])* pub(in crate::config) $x: $xty, )*
            $( pub(in crate::config) $field: $bty, )*
        }

        $(#[$vattr])*
        $vis struct $Values {
            $( $(#[$xattr])* pub(in crate::config) $x: $xty, )*
            $( pub(in crate::config) $field: $crate::config::table::checked_type!($bty $(=> $cty)?), )*
        }

        impl Default for $Builder {
            /// Every property at its default.
            fn default() -> Self {
                $Builder {
                    $( $x: $xdefault, )*
                    $( $field: $default, )*
                }
            }
        }

        impl $Builder {
            /// Sets `property` from its `value` if the property is one of
            /// this table's (`None` if it is not): the value's syntax is
            /// checked now, its range by [`check_each`](Self::check_each).
            pub(in crate::config) fn parse(
                &mut self,
                property: &str,
                value: &str,
            ) -> Option<Result<(), $crate::error::Error>> {
                let trimmed = value.trim();
                let result = match property {
                    $(
                        $NAME $($(| $alias)+)? => ($parse)(
                            property,
                            $crate::config::table::value_to_parse!($($untrimmed)?; value, trimmed),
                        )
                        .map(|parsed| self.$field = parsed),
                    )*
                    _ => return None,
                };
                Some(result)
            }

            /// Checks each value on its own (its range), in the table's
            /// order.
            pub(in crate::config) fn check_each(&self) -> Result<(), $crate::error::Error> {
                $($(
                    $crate::config::table::check_value!($NAME, self.$field, $ckind($($carg),*));
                )?)*
                Ok(())
            }

            /// The checked values: these, with the ones `build` computed
            /// from several.
            pub(in crate::config) fn into_values(self, computed: $Computed) -> $Values {
                let set = self;
                $Values {
                    $( $x: set.$x, )*
                    $( $field: $crate::config::table::value_of!(set, computed, $field $(=> $cty)?), )*
                }
            }
        }

        impl $Values {
            /// Appends every value `to_properties` lists (the secrets
            /// never, unset optional ones not at all), in the table's
            /// order.
            pub(in crate::config) fn render(&self, out: &mut Vec<(&'static str, String)>) {
                $(
                    if let Some(value) = ($render)(&self.$field) {
                        out.push(($NAME, value));
                    }
                )*
            }
        }
    };
}

/// The getters of a property table's rows, for a configuration whose
/// `$path` field holds the table's values.
macro_rules! property_getters {
    (
        $path:ident;
        rows {$(
            $NAME:ident = $prop:literal {
                $field:ident: $bty:ty $(=> $cty:ty)? = $default:expr;
                $(also $($alias:ident)|+;)?
                parse $($untrimmed:ident)?: $parse:expr;
                $(check $ckind:ident($($carg:expr),*);)?
                render: $render:expr;
                get $(#[$gdoc:meta])* -> $gret:ty $(= $gfn:path)? $({ $($gtail:tt)* })?;
                $(set $(#[$sdoc:meta])* ($sarg:ident: $sty:ty) $(=> $sconv:expr)?;)?
                docs [$typed:literal, $dflt:literal, $meaning:literal, $valid:literal $(, $note:literal)?];
            }
        )*}
        $($unbound:tt)*
    ) => {$(
        $(#[$gdoc])*
        pub fn $field(&self) -> $gret {
            $crate::config::table::getter_value!(self.$path.$field; $(= $gfn)? $({ $($gtail)* })?)
        }
    )*};
}

/// The typed setters of a property table's rows, for a builder whose
/// `$path` field holds the table's values as set; each tells the builder's
/// `on_set` which property it set.
macro_rules! property_setters {
    (
        $path:ident;
        rows {$(
            $NAME:ident = $prop:literal {
                $field:ident: $bty:ty $(=> $cty:ty)? = $default:expr;
                $(also $($alias:ident)|+;)?
                parse $($untrimmed:ident)?: $parse:expr;
                $(check $ckind:ident($($carg:expr),*);)?
                render: $render:expr;
                get $(#[$gdoc:meta])* -> $gret:ty $(= $gfn:path)? $({ $($gtail:tt)* })?;
                $(set $(#[$sdoc:meta])* ($sarg:ident: $sty:ty) $(=> $sconv:expr)?;)?
                docs [$typed:literal, $dflt:literal, $meaning:literal, $valid:literal $(, $note:literal)?];
            }
        )*}
        $($unbound:tt)*
    ) => {$($(
        $(#[$sdoc])*
        pub fn $field(mut self, $sarg: $sty) -> Self {
            self.$path.$field = $crate::config::table::setter_value!($sarg $(=> $sconv)?);
            self.on_set($prop);
            self
        }
    )?)*};
}

/// The type of a checked value: the builder's, or the one after `=>`.
macro_rules! checked_type {
    ($set:ty) => {
        $set
    };
    ($set:ty => $checked:ty) => {
        $checked
    };
}

/// A checked value: the one set, or the one `build` computed.
macro_rules! value_of {
    ($set:ident, $computed:ident, $field:ident) => {
        $set.$field
    };
    ($set:ident, $computed:ident, $field:ident => $checked:ty) => {
        $computed.$field
    };
}

/// The value a row's parser reads: trimmed, unless `untrimmed`.
macro_rules! value_to_parse {
    (untrimmed; $value:ident, $trimmed:ident) => {
        $value
    };
    (; $value:ident, $trimmed:ident) => {
        $trimmed
    };
}

/// A row's range check.
macro_rules! check_value {
    ($name:expr, $value:expr, ms($min:expr, $max:expr)) => {
        $crate::config::values::check_ms($name, $value, $min, $max)?
    };
    ($name:expr, $value:expr, int($min:expr)) => {
        $crate::config::values::check_int($name, $value, $min)?
    };
    ($name:expr, $value:expr, with($check:expr)) => {
        ($check)($name, &$value)?
    };
}

/// What a getter returns: the field (a copy), a method chain on it, or a
/// function of it.
macro_rules! getter_value {
    ($field:expr;) => { $field };
    ($field:expr; = $function:path) => { $function($field) };
    ($field:expr; { $($chain:tt)* }) => { $field $($chain)* };
}

/// What a setter stores: its argument, or the expression after `=>`.
macro_rules! setter_value {
    ($argument:ident) => {
        $argument
    };
    ($argument:ident => $value:expr) => {
        $value
    };
}

pub(super) use {
    check_value, checked_type, getter_value, property_getters, property_setters, property_values,
    setter_value, value_of, value_to_parse,
};
