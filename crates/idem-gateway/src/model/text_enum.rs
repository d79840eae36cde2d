//! `text_enum!`: one declaration gives a text-backed enum its `ALL`, `as_str`, `parse`,
//! `Display` and sqlx TEXT codec, so that a word stored in the tables is typed in code.

/// `ALL`, `as_str`, `parse`, `Display` and the sqlx encoding (as TEXT) of a text-backed enum.
/// `ALL` is a slice, or with `[N]` after the description an array of the N values.
macro_rules! text_enum {
    ($ty:ident, $what:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];
        }
        $crate::model::text_enum::text_enum!(@words $ty, $what, { $($variant => $text),+ });
    };
    ($ty:ident, $what:literal, [$n:literal], { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: [Self; $n] = [$(Self::$variant),+];
        }
        $crate::model::text_enum::text_enum!(@words $ty, $what, { $($variant => $text),+ });
    };
    (@words $ty:ident, $what:literal, { $($variant:ident => $text:literal),+ }) => {
        impl $ty {
            /// The word stored in the table and shown to operators.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// The value stored as `text`, or `None` for any other word.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl<DB: ::sqlx::Database> ::sqlx::Type<DB> for $ty
        where
            str: ::sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as ::sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as ::sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: ::sqlx::Database> ::sqlx::Encode<'q, DB> for $ty
        where
            &'q str: ::sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as ::sqlx::Database>::ArgumentBuffer,
            ) -> Result<::sqlx::encode::IsNull, ::sqlx::error::BoxDynError> {
                <&'q str as ::sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        impl<'r, DB: ::sqlx::Database> ::sqlx::Decode<'r, DB> for $ty
        where
            &'r str: ::sqlx::Decode<'r, DB>,
        {
            fn decode(value: <DB as ::sqlx::Database>::ValueRef<'r>) -> Result<Self, ::sqlx::error::BoxDynError> {
                let text = <&'r str as ::sqlx::Decode<'r, DB>>::decode(value)?;
                Self::parse(text).ok_or_else(|| {
                    format!(concat!("unknown ", $what, " {:?} in the gateway's tables"), text).into()
                })
            }
        }
    };
}

pub(crate) use text_enum;
