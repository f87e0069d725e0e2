"""Why a policy is not Ready: the reasons its Ready condition gives, as one enum.

A reason is part of the contract (alerts, runbooks and people read it), so it is spelled once,
here, and code switches on the enum rather than on strings. This module starts with the reasons
the DeadLetterPolicyClass work added and the one they extend (``InvalidSpec``); the others the
operator writes are still string literals where they are set (issue 30 moves them here).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Reason(StrEnum):
    """A reason of a policy's Ready (or TopicsReady) condition."""

    #: The policy fails the shared model's validation (a field named in the message).
    INVALID_SPEC = "InvalidSpec"
    #: ``spec.className`` names a DeadLetterPolicyClass that does not exist.
    CLASS_NOT_FOUND = "ClassNotFound"
    #: The policy's class exists but is itself invalid (its problems are in the message).
    CLASS_INVALID = "ClassInvalid"
    #: No ``spec.className``, classes exist, and none is marked default.
    NO_DEFAULT_CLASS = "NoDefaultClass"
    #: No ``spec.className``, and more than one class is marked default.
    DEFAULT_CLASS_AMBIGUOUS = "DefaultClassAmbiguous"
    #: The class's ``namespaceSelector`` does not select the policy's namespace.
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    #: The policy asks for more than its class allows (the field and the rule in the message).
    CLASS_VIOLATION = "ClassViolation"
    #: The API server refused one of the Spark pods' identity objects (service account, Lease,
    #: Role, RoleBinding: the operator may not bind the drivers' ClusterRole, say). A JobRunning
    #: reason: the policy stays valid and its job waits.
    IDENTITY_REFUSED = "IdentityRefused"


#: The reasons that make a policy's phase ``Invalid``: nothing is created for it, and a job of an
#: earlier valid generation keeps running as it was.
INVALID: Final = frozenset(
    {
        Reason.INVALID_SPEC,
        Reason.CLASS_NOT_FOUND,
        Reason.CLASS_INVALID,
        Reason.NO_DEFAULT_CLASS,
        Reason.DEFAULT_CLASS_AMBIGUOUS,
        Reason.NAMESPACE_NOT_ALLOWED,
        Reason.CLASS_VIOLATION,
    }
)
