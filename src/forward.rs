//! `forward!`: methods whose body is one call of a method of the same name with the same
//! arguments, written as a list of signatures (one a line) instead of each signature again
//! with its one-line body. A trait keeps its signatures and docs where they are; an impl
//! (or an enum's dispatch) that only hands each call on lists the methods it hands on.

/// Writes one method per `fn name(arg: Type, ..) -> Ret;` listed, each handing its call on
/// to a method of the same name with the same arguments. The receiver (`&self` or
/// `&mut self`) is said once, before `=>`, and so is where the call goes:
///
/// - `Type`: `Type::name(self, args..)`, the type's own (inherent) method: a trait impl over
///   a type's inherent methods. A listed name the type lacks would call the trait method
///   itself, which rustc reports as unconditional recursion.
/// - `(**self)`: `(**self).name(args..)`, through a smart pointer.
/// - `(self.field)`: `self.field.name(args..)`.
/// - `(via!)`: `via!(self, name(args..))`, a macro the caller defines (an enum's dispatch).
///
/// `fn name(..) -> Ret = other;` hands the call on to `other` instead of `name`.
///
/// A visibility before the receiver (`pub(crate) &self => ..`) is given to every method; an
/// attribute before a `fn`, to that method.
macro_rules! forward {
    ($vis:vis &self => $($rest:tt)*) => {
        forward!(@each [$vis] [&Self] $($rest)*);
    };
    ($vis:vis &mut self => $($rest:tt)*) => {
        forward!(@each [$vis] [&mut Self] $($rest)*);
    };
    (@each [$vis:vis] [$recv:ty] $to:tt; $(
        $(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),* $(,)?) -> $r:ty $(= $other:ident)?;
    )*) => {$(
        $(#[$m])*
        #[allow(clippy::needless_arbitrary_self_type)]
        $vis fn $name(self: $recv, $($a: $t),*) -> $r {
            forward!(@call self $to ($name $($other)?) ($($a),*))
        }
    )*};
    (@call $s:ident $to:tt ($name:ident $other:ident) $args:tt) => {
        forward!(@call $s $to ($other) $args)
    };
    (@call $s:ident (**self) ($name:ident) ($($a:ident),*)) => { (**$s).$name($($a),*) };
    (@call $s:ident (self.$f:ident) ($name:ident) ($($a:ident),*)) => { $s.$f.$name($($a),*) };
    (@call $s:ident ($via:ident!) ($name:ident) ($($a:ident),*)) => { $via!($s, $name($($a),*)) };
    (@call $s:ident $to:ident ($name:ident) ($($a:ident),*)) => { $to::$name($s, $($a),*) };
}
