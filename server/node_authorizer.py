"""The node's authorizer (authorizer.class.name): Kafka's StandardAuthorizer over the ACLs
of the node's current metadata image, with the node's super.users and
allow.everyone.if.no.acl.found. Built once per change of the image's ACLs (an image whose
ACLs did not change shares their index), not once per request; every request of the node
asks the one current (server/request_authorization.py)."""

from __future__ import annotations

from metadata.authorizer import AclIndex, AuthorizerSettings, StandardAuthorizer
from metadata.image import EMPTY_IMAGE, MetadataImage


class NodeAuthorizer:
    def __init__(self, settings: AuthorizerSettings | None) -> None:
        """`settings` None: no authorizer configured (`current` is None: all allowed)."""
        self.settings = settings
        self._index: AclIndex = EMPTY_IMAGE.acls.index
        self._authorizer = None if settings is None else StandardAuthorizer(self._index, settings)

    def current(self) -> StandardAuthorizer | None:
        return self._authorizer

    def on_image(self, image: MetadataImage) -> None:
        """A new metadata image: the authorizer follows its ACLs when they changed."""
        index = image.acls.index
        if self.settings is None or index is self._index:
            return
        self._index = index
        self._authorizer = StandardAuthorizer(index, self.settings)
