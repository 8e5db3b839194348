// What a TypeScript caller writes against the types openapi-typescript generates from the
// document (generated/api.d.ts). Only type-checked (tsc --noEmit), never run: every line below
// must compile, and every `@ts-expect-error` must really be an error.
import type { components, operations, paths } from "./generated/api";

type Schemas = components["schemas"];
type Domain = Schemas["Domain"];
type ApiError = Schemas["Error"];

type JsonBody<Op> = Op extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;
type Answer<Op, S extends number> = Op extends { responses: { [K in S]: { content: { "application/json": infer A } } } }
  ? A
  : never;

async function call<T>(base: string, token: string, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) {
    const error = (await response.json()) as ApiError;
    throw new Error(`${error.status} ${error.code}: ${error.message} (request ${response.headers.get("X-Request-Id")})`);
  }
  return (await response.json()) as T;
}

// Request bodies and answers come from the operations.
const create: JsonBody<operations["createDomain"]> = { apex: "shop.example.com", tags: ["eu"] };
// @ts-expect-error apex is required
const createNothing: JsonBody<operations["createDomain"]> = { tags: [] };
const query: JsonBody<operations["queryDomains"]> = {
  status: "action_needed",
  sort: { by: "apex", dir: "asc" },
  page: { limit: 50 },
};
// @ts-expect-error an opsStatus that does not exist
const badQuery: JsonBody<operations["queryDomains"]> = { status: "waiting" };

export async function onboard(base: string, token: string): Promise<string[]> {
  const domain = await call<Answer<operations["createDomain"], 201>>(base, token, "POST", "/v1/domains", create);
  const records: Schemas["DnsRecord"][] = [domain.validation.delegation, domain.validation.ownership];
  const verify = await call<Schemas["VerifyResult"]>(base, token, "POST", `/v1/domains/${domain.id}/verify-delegation`);
  // The certificate part is the issuance summary, with its own status.
  const certificate: Schemas["CertificateStatus"] | undefined = verify.certificate?.status;

  const hosts: string[] = records.map((r) => `${r.type} ${r.host} ${r.value}`);
  let cursor: string | undefined;
  do {
    const page: Schemas["DomainPage"] = await call(base, token, "POST", "/v1/domains/query", {
      ...query,
      page: { limit: 50, ...(cursor === undefined ? {} : { cursor }) },
    });
    hosts.push(...page.items.map((d: Domain) => `${d.apex} ${d.opsStatus}`));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return certificate === undefined ? hosts : [...hosts, certificate];
}

// Statuses are closed unions: a switch over every value needs no default.
export function label(status: Schemas["OpsStatus"]): string {
  switch (status) {
    case "active":
      return "Secured";
    case "pending":
      return "Waiting for the certificate";
    case "action_needed":
      return "DNS needs a change";
    case "blocked":
      return "Blocked";
  }
}

// Errors: the code is one of the listed ones; a validation failure has its details typed.
export function explain(error: ApiError | Schemas["ValidationError"]): string {
  if (error.code === "validation_error" && error.details !== undefined) {
    const fields: Schemas["FieldErrors"] = error.details.fieldErrors ?? {};
    return Object.entries(fields)
      .map(([field, problems]) => `${field}: ${(problems ?? []).join("; ")}`)
      .join("\n");
  }
  if (error.code === "internal_error") {
    return `Quote request ${error.details?.requestId ?? "?"}`;
  }
  // @ts-expect-error not a code the service answers with
  const unknown: Schemas["ErrorCode"] = "teapot";
  return `${error.code}: ${error.message}${unknown}`;
}

// The secret is in the creation answer only; a listed key has none.
export function secretOf(created: Answer<operations["createApiKey"], 201>, listed: Schemas["ApiKey"][]): string {
  const asListed: Schemas["ApiKey"] = created;
  // @ts-expect-error a listed key carries no secret
  const leaked: string = listed[0]?.secret;
  return created.secret + asListed.prefix + leaked;
}

export function hookSecret(created: Answer<operations["createWebhook"], 201>): string {
  const status: Schemas["WebhookStatus"] = created.status;
  return `${created.secret} ${status}`;
}

// Response headers are part of each answer's type.
type Limited = paths["/v1/domains"]["post"]["responses"][429]["headers"];
export const retryAfter = (headers: Limited): number => headers["Retry-After"];
export const remaining = (headers: paths["/v1/domains/{domainId}"]["get"]["responses"][200]["headers"]): string =>
  `${headers.RateLimit} (${headers["X-Request-Id"]})`;

// The session answer is null when no credential was sent.
export const who = (session: Answer<operations["getSession"], 200>): string => session?.userEmail ?? "anonymous";

export const unused = [createNothing, badQuery];
