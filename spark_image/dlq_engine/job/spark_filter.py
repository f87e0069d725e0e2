"""A redrive filter as Spark's own parser reads it, checked against the filter language.

``model.redrive_filter`` checks a filter with a small parser of its own. This module parses the
same text with the parser ``F.expr`` uses (the session's ``sqlParser().parseExpression``, on the
JVM) and walks the unresolved expression tree it returns, node by node, against the same lists:
every function call must name an allowed function, every name a dead-letter column, every
``CAST`` a simple type, and every other node must be one of the operators, literals and
constructs the language has (``NODES``). A filter passes only when both checks pass, so the
two parsers would have to be wrong in the same way for anything else to run.
"""

from __future__ import annotations

from typing import Any, Final

from py4j.protocol import Py4JJavaError
from pyspark.errors import ParseException
from pyspark.sql import SparkSession

from dlq_engine.model.redrive_filter import (
    cast_refused,
    column_allowed,
    column_refused,
    construct_refused,
    function_allowed,
    function_refused,
)

#: The expression nodes (Catalyst class names) of literals, operators and the constructs the
#: language has; function calls, names and casts are checked by what they name.
NODES: Final = frozenset(
    {
        "Literal",
        "UnresolvedExtractValue",  # headers['team'], x.field
        "CaseWhen",
        "In",
        "Like",
        "ILike",
        "RLike",
        "LikeAny",
        "NotLikeAny",
        "LikeAll",
        "NotLikeAll",
        "IsNull",
        "IsNotNull",
        "And",
        "Or",
        "Not",
        "EqualTo",
        "EqualNullSafe",
        "LessThan",
        "LessThanOrEqual",
        "GreaterThan",
        "GreaterThanOrEqual",
        "Add",
        "Subtract",
        "Multiply",
        "Divide",
        "Remainder",
        "IntegralDivide",
        "UnaryMinus",
        "UnaryPositive",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitwiseNot",
        "ShiftLeft",
        "ShiftRight",
        "ShiftRightUnsigned",
        "Concat",  # a || b
        "CurrentDate",  # current_date, when Spark enforces reserved keywords
        "CurrentTimestamp",
    }
)
#: The types (Catalyst ``DataType`` class names) a CAST may convert to: ``CAST_TYPES``.
CAST_CLASSES: Final = frozenset(
    {
        "StringType",
        "VarcharType",
        "CharType",
        "BooleanType",
        "ByteType",
        "ShortType",
        "IntegerType",
        "LongType",
        "FloatType",
        "DoubleType",
        "DecimalType",
        "DateType",
        "TimestampType",
        "TimestampNTZType",
        "BinaryType",
    }
)
#: Nodes without children.
_LEAVES: Final = frozenset({"Literal", "UnresolvedAttribute"})
#: Nodes outside the language, by what the model's parser calls them.
_CONSTRUCTS: Final = {
    "ScalarSubquery": "a subquery",
    "Exists": "a subquery",
    "ListQuery": "a subquery",
    "InSubquery": "a subquery",
    "LateralSubquery": "a subquery",
    "LambdaFunction": "a lambda function (->)",
    "UnresolvedNamedLambdaVariable": "a lambda function (->)",
    "NamedArgumentExpression": "a named argument (=>)",
    "UnresolvedStar": "*",
    "UnresolvedRegex": "*",
    "PosParameter": "a parameter marker (?)",
    "NamedParameter": "a parameter marker or path (:)",
    "CreateNamedStruct": "a row or struct ((a, b))",
    "Collate": "COLLATE",
    "UnresolvedCollation": "COLLATE",
    "IsUnknown": "IS UNKNOWN (write IS NULL)",
    "IsNotUnknown": "IS UNKNOWN (write IS NULL)",
}
#: Nodes Spark's parser makes for a call of a function by its own syntax.
_FUNCTIONS: Final = {
    "ExpressionWithUnresolvedIdentifier": "identifier",  # IDENTIFIER('name')(...)
    "First": "first",
    "Last": "last",
    "AnyValue": "any_value",
}


def spark_filter_problem(spark: SparkSession, text: str) -> str | None:
    """What is wrong with ``text`` as a filter in the tree Spark's parser makes of it (the
    first problem, in the tree's pre-order), or None."""
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        root = parser.parseExpression(text)
    except (ParseException, Py4JJavaError) as error:
        return f"does not parse: {str(error).strip().splitlines()[0]}"
    stack = [root]
    while stack:  # iterative: a long chain of + or || is as deep as it is long
        node = stack.pop()
        # nodeName: the class's simple name, one call across py4j (each costs ~0.1 ms); empty
        # for an anonymous class, never taken for the class it extends.
        kind = str(node.nodeName()) or _class_name(node)
        problem = _problem(node, kind)
        if problem is not None:
            return problem
        if kind not in _LEAVES:
            children = node.children()
            stack.extend(children.apply(i) for i in reversed(range(children.size())))
    return None


def _problem(node: Any, kind: str) -> str | None:
    if kind == "UnresolvedFunction":
        return _call_problem(node)
    if kind == "UnresolvedAttribute":
        parts = _strings(node.nameParts())
        return None if column_allowed(parts) else column_refused(parts[0])
    if kind == "Cast":
        return _cast_problem(node.dataType())
    if kind in NODES:
        return None
    if kind == "AggregateExpression":  # first(x), last(x), any_value(x)
        return function_refused(_FUNCTIONS.get(_class_name(node.aggregateFunction()), "an aggregate"))
    if kind in _FUNCTIONS:
        return function_refused(_FUNCTIONS[kind])
    shown = kind.split("$", 1)[0]
    return construct_refused(_CONSTRUCTS.get(shown, f"the expression {shown}"))


def _call_problem(node: Any) -> str | None:
    parts = _strings(node.nameParts())
    if len(parts) != 1 or not function_allowed(parts[0]):
        return function_refused(".".join(parts))
    if node.isDistinct():
        return construct_refused("DISTINCT")
    if node.filter().isDefined():
        return construct_refused("FILTER (WHERE ...)")
    if _ignores_nulls(node.ignoreNulls()):
        return construct_refused("IGNORE NULLS")
    if node.orderingWithinGroup().nonEmpty():
        return construct_refused("WITHIN GROUP")
    return None


def _ignores_nulls(flag: Any) -> bool:
    """``UnresolvedFunction.ignoreNulls``: a boolean up to Spark 4.1, an ``Option`` from 4.2
    (empty unless the call says IGNORE NULLS or RESPECT NULLS)."""
    if isinstance(flag, bool):
        return flag
    return bool(flag.isDefined() and flag.get())


def _cast_problem(data_type: Any) -> str | None:
    kind = _class_name(data_type)
    if kind == "StringType" and data_type.sql() != "STRING":
        return construct_refused("COLLATE")
    if kind in CAST_CLASSES:
        return None
    # typeName: "map", "array", "interval day": the word a CAST names.
    return cast_refused(str(data_type.typeName()).split()[0])


def _class_name(node: Any) -> str:
    """``org.apache.spark.sql.types.IntegerType$`` -> ``IntegerType``: a Scala object's class
    by its name; an anonymous class (``IsUnknown$$anon$1``) as it is, so it is never taken for
    the class it extends."""
    name = str(node.getClass().getName()).rsplit(".", 1)[-1]
    return name[:-1] if name.endswith("$") and name.count("$") == 1 else name


def _strings(sequence: Any) -> tuple[str, ...]:
    return tuple(str(sequence.apply(i)) for i in range(sequence.size()))
