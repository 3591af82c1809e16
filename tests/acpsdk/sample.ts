// sample.ts: a web app that talks ACP through relaywasm with the official
// SDK. It is never run; `tsc --noEmit` (tests/e2e TestSDKTypes) checks that
// att.stream() is a Stream the SDK accepts unchanged, against the SDK's own
// types from npm, and that the reloaded-page pattern of the README compiles.
import { client, methods, type AnyMessage, type Stream } from "@agentclientprotocol/sdk";
import { loadRelay, RelayError, type AcpStream, type Attachment } from "../../jsbridge/relayjs/relay.js";

export async function chat(sessionKept: string | null): Promise<string> {
  const relay = await loadRelay();
  const att: Attachment = await relay.attach({
    url: "wss://relay.example/v1/attach",
    instance: "demo",
    token: "dev-token",
    history: 1000,
    onMessage() {}, // what the stream does not take: a previous page's responses
  });

  // The SDK's own Stream type, both ways: the default and an explicit one.
  const s: Stream = att.stream();
  const typed: AcpStream<AnyMessage> = att.stream<AnyMessage>();
  const back: Stream = typed;
  void back;

  const shown: string[] = [];
  const app = client({ name: "sample" })
    .onNotification(methods.client.session.update, ({ params }) => {
      const u = params.update;
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") shown.push(u.content.text);
    })
    .onRequest(methods.client.session.requestPermission, () => ({
      outcome: { outcome: "selected", optionId: "allow" },
    }));

  try {
    return await app.connectWith(s, async (ctx) => {
      const init = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      let sessionId = sessionKept;
      if (sessionId && init.agentCapabilities?.loadSession) {
        await ctx.request(methods.agent.session.load, { sessionId, cwd: "/", mcpServers: [] });
      } else {
        sessionId = (await ctx.request(methods.agent.session.new, { cwd: "/", mcpServers: [] })).sessionId;
      }
      const r = await ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "ping" }] });
      return r.stopReason;
    });
  } catch (e) {
    if (e instanceof RelayError && (e.code === "cursor_evicted" || e.code === "evicted")) return "start again";
    throw e;
  }
}
