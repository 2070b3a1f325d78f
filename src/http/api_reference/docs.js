// Points the vendored Swagger UI at payorch's own document (docs/guides/api-reference.md).
// A file of its own because the page's policy runs no inline script.
"use strict";

window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#reference",
  // Left at its default, Swagger UI sends the document to a validator on the internet and
  // shows its badge; the page is to work offline and talk to payorch only.
  validatorUrl: null,
  // An operation's address in the URL's fragment, so a link can point at it.
  deepLinking: true,
  // Every operation listed with its summary; its description and examples open with it.
  docExpansion: "list",
  // A key given under "Authorize" lives as long as the tab: never written to storage.
  persistAuthorization: false,
});
