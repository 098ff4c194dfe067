//! The one place that names every platform: builds each platform's side of the mock,
//! registers it with the server, and starts them all on one port. Adding a platform is its
//! folder, its part of [`MockConfig`], and a line here.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::config::MockConfig;
use super::dingtalk::DingTalk;
use super::discord::Discord;
use super::fault::FaultSwitch;
use super::feishu::Feishu;
use super::handle::MockPlatform;
use super::matrix::Matrix;
use super::mattermost::Mattermost;
use super::opcode_gateway::state::Gateway;
use super::opcode_gateway::WS_PATH;
use super::post_record::PostRecord;
use super::qqbot::QqBot;
use super::server::{self, Server};
use super::side::Sides;
use super::slack::Slack;
use super::stats::Counters;
use super::telegram::Telegram;
use super::wecom::WeCom;
use super::weixin::Weixin;

impl MockPlatform {
    pub async fn start(config: MockConfig) -> std::io::Result<MockPlatform> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(Counters::default());
        let fault = Arc::new(FaultSwitch::default());
        let posts = Arc::new(PostRecord::new());
        let ws_url = format!("ws://{addr}{WS_PATH}");
        let gateway = Gateway::new(&config, ws_url, counters.clone(), fault.clone());
        let gateway = Arc::new(gateway);
        let mut sides = Sides::default();
        sides.register(posts.clone());
        sides.register(gateway.clone());
        sides.register(Arc::new(QqBot::new(
            &config,
            gateway.clone(),
            posts.clone(),
        )));
        let http_base = format!("http://{addr}");
        let discord = Discord::new(&config, gateway, posts.clone(), http_base.clone());
        sides.register(Arc::new(discord));
        let ws_base = format!("ws://{addr}");
        sides.register(Arc::new(Feishu::new(
            config.feishu,
            ws_base.clone(),
            posts.clone(),
        )));
        let slack = Slack::new(config.slack, ws_base, http_base.clone(), posts.clone());
        sides.register(Arc::new(slack));
        sides.register(Arc::new(Telegram::new(config.telegram, posts.clone())));
        sides.register(Arc::new(Weixin::new(
            config.weixin,
            http_base.clone(),
            posts.clone(),
        )));
        sides.register(Arc::new(Matrix::new(config.matrix, posts.clone())));
        sides.register(Arc::new(Mattermost::new(config.mattermost, posts.clone())));
        sides.register(Arc::new(WeCom::new(config.wecom)));
        sides.register(Arc::new(DingTalk::new(
            config.dingtalk,
            addr,
            posts.clone(),
        )));

        let (shutdown, shutdown_rx) = watch::channel(false);
        let server = Arc::new(Server::new(sides.served(), fault, counters));
        let accept = server::accept_loop(listener, server, shutdown_rx.clone());
        let mut tasks = vec![tokio::spawn(accept)];
        for side in sides.served() {
            if let Some(task) = side.background(shutdown_rx.clone()) {
                tasks.push(tokio::spawn(task));
            }
        }
        tracing::info!(%addr, "mock platform listening");
        Ok(MockPlatform::new(addr, sides, posts, shutdown, tasks))
    }
}
