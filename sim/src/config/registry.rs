//! Policy families and their registration: [`policy_family!`] declares a family's `kind = "..."`
//! enum from one list, one line per policy.
//!
//! ```text
//!   policy_family!(pub enum QueueSpec: dyn QueuePolicy {
//!       "fcfs" => Fcfs(fcfs::Fcfs),
//!       "edf"  => Edf(edf::Edf),          ◄── adding a policy: this line and the file edf.rs
//!   });
//! ```
//! Each line names the policy's file (a module the macro declares, its spec type re-exported).
//! Each policy is a spec type in its own file (its settings, serde, and the family's trait:
//! validation, defaults, the runtime object it builds). The macro generates the enum, its serde
//! with key paths kept ([`crate::tagged_enum!`]), `KINDS` (the list the docs, errors and the
//! swarm test read), `kind()` and `spec()`: the variant's spec as the family's trait object,
//! through which the family validates and builds without a `match` per policy.

/// Declares a policy family: `policy_family!(pub enum Spec: dyn Trait { "kind" => Variant(file::Type), … })`.
#[macro_export]
macro_rules! policy_family {
    ($(#[$meta:meta])* $vis:vis enum $ty:ident: dyn $tr:path { $($kind:literal => $variant:ident($module:ident::$inner:ident)),* $(,)? }) => {
        $(mod $module; pub use $module::$inner;)*

        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize)]
        #[serde(tag = "kind")]
        $vis enum $ty {
            $(#[serde(rename = $kind)] $variant($inner),)*
        }

        $crate::tagged_enum!($ty { $($kind => $variant($inner)),* });

        impl $ty {
            /// The policy's settings, as the family's trait.
            pub fn spec(&self) -> &dyn $tr {
                match self {
                    $($ty::$variant(p) => p,)*
                }
            }

            /// The policy's settings, to fill in defaults.
            pub fn spec_mut(&mut self) -> &mut dyn $tr {
                match self {
                    $($ty::$variant(p) => p,)*
                }
            }

            /// The `kind` name of this policy.
            pub fn kind(&self) -> &'static str {
                match self {
                    $($ty::$variant(_) => $kind,)*
                }
            }
        }
    };
}
